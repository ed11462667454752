"""What a validation check result says: the one rule (pure, no Django).

A record's checks are dicts ``{"name", "passed", "detail", "waived"?, "unverifiable"?}``.
``check_state`` decides passed | failed | waived | unverifiable; the validator's reasons and
verdict (``memoryhub.memory.validation.judged``), waivers, ``ValidationRecord.failed_checks``,
the summary and lineage pages, the review inbox and the waive button all follow it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

PASSED, FAILED, WAIVED, UNVERIFIABLE = "passed", "failed", "waived", "unverifiable"
# A hash mismatch means the bytes are not what was produced: no reviewer can vouch for them.
NON_WAIVABLE = frozenset({"integrity"})


def check_state(check: dict[str, Any], waived: Collection[str] = ()) -> str:
    """passed | failed | waived | unverifiable: what one check of a record says.

    A check that could not run (``passed: None``, ``unverifiable``: opaque content) neither passed
    nor failed. A failed check is waived when it carries ``waived: true`` or its name is in
    ``waived`` (the record's ``waived_checks``). Only FAILED checks are reasons, keep a record
    from passing and can be waived.
    """
    passed = check.get("passed")
    if passed is True:
        return PASSED
    if passed is None or check.get("unverifiable"):
        return UNVERIFIABLE
    if check.get("waived") or check.get("name") in waived:
        return WAIVED
    return FAILED


def failed_names(checks: Iterable[Any], waived: Collection[str] = ()) -> list[str]:
    """Names of the FAILED checks, in check order."""
    return [
        c["name"]
        for c in checks
        if isinstance(c, dict) and c.get("name") and check_state(c, waived) == FAILED
    ]


def waivable(failed: Collection[str]) -> bool:
    """A waiver of ``failed`` could make the record pass: something failed and none of it is
    NON_WAIVABLE (a broken hash stays failed whatever else is waived)."""
    return bool(failed) and not set(failed) & NON_WAIVABLE


def validation_result(passed: bool, checks: Iterable[Any]) -> str:
    """passed | failed | unverifiable: what a validation record says, in one word."""
    if not passed:
        return FAILED
    if any(isinstance(c, dict) and check_state(c) == UNVERIFIABLE for c in checks):
        return UNVERIFIABLE
    return PASSED
