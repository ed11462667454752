"""What extractive-v3 asks of the salient extractor: the units and obligation sentences of a text.

The one extractor is ``memoryhub.core.salient`` (Unicode-aware, any genre). Until it is present this
adapter falls back to a small provisional matcher with the same contract, so the compactor's
budget/priority/manifest machinery does not depend on it. Only the compactor uses this module; the
quality benchmark's truth is the generator's labels, never this code.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from memoryhub.core.quality import TOKEN_CLASSES, extract

try:  # pragma: no cover - exercised by whichever is installed
    from memoryhub.core import salient as _salient  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _salient = None


@dataclass(frozen=True)
class Sentence:
    text: str
    obligation: bool
    decision: bool
    units: tuple[str, ...]


# -- provisional fallback (same contract as memoryhub.core.salient) ---------------------------------

_UNIT = regex.compile(
    r"""
    (?:https?://[^\s"'<>`)\]]+)                                  # URLs
    | (?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+)                           # e-mails
    | (?:[\p{Sc}][ ]?\d[\d.,]*\d|\d[\d.,]*[ ]?(?:[\p{Sc}]|\b[A-Z]{3}\b))   # money
    | (?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?)        # ISO dates
    | (?:\d+(?:[.,]\d+)*[ ]?[\p{Han}\p{Katakana}])                  # 30秒, 5回
    | (?:\d+(?:[.,]\d+)*\.?[ ](?:Januar|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember|January|February|March|June|July|October|December|%|ms|s|MB|GB|KB|cm|mm|kg|min|seconds?|minutes?|hours?|days?|Sekunden|Minuten|Stunden|Tage|Januar|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember))
    | (?:[A-Za-z0-9_./-]*[A-Za-z_][A-Za-z0-9_./-]*\.[A-Za-z]+:\d+)    # path:line
    | (?:\d+(?:[-/:]\d+)+)                                       # 4471-2290-18
    | (?:(?=[A-Za-z0-9_./:-]*\d)(?=[A-Za-z0-9_./:-]*[A-Za-z])[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9])  # ids
    | (?:\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b)                          # CONSTANT_NAMES
    | (?:\b[a-z_]+\.[a-z_]+(?:\.[a-z_]+)*\b)                     # dotted.symbols
    | (?:\d+(?:[.,]\d+)*%?)                                      # plain numbers
    """,
    regex.VERBOSE,
)
_OBLIGATION = regex.compile(
    r"\b(?:must|never|do not|don't|required|requires?|only|until|shall|at most|at least|muss|müssen|"
    r"darf nicht|dürfen nicht|höchstens|mindestens|nur|erforderlich|nie)\b"
    r"|しなければ|こと。|こと$|禁止|必須|してはならない|しないこと|以内",
    regex.IGNORECASE,
)
_DECISION = regex.compile(
    r"\b(?:decided|decision|we will|we'll|approved|agreed|entschieden|Entscheidung)\b|決定|承認",
    regex.IGNORECASE,
)
_SENTENCE = regex.compile(r"(?<=[^\d\s][.!?])\s+|(?<=[。！？])|\n+")


def _fallback_units(text: str) -> list[str]:
    out: dict[str, None] = {}
    for match in _UNIT.finditer(text):
        value = match.group(0).strip().rstrip(".,;:")
        if len(value) > 1 or value.isdigit():
            out[value] = None
    return list(out)


def units(text: str) -> list[str]:
    """The salient units of ``text`` in order of appearance, without duplicates.

    The union of the general extractor and the token classes the deployed validators measure
    (``memoryhub.core.quality.extract``), so a summary keeps what either will look for; a unit
    inside a longer one is left out (kept alone it would read as a new token).
    """
    found = [u.text for u in _salient.units(text)] if _salient is not None else _fallback_units(text)
    classic = extract(text)
    for name in TOKEN_CLASSES:
        found += sorted(classic[name], key=lambda t: (text.find(t), t))
    unique = list(dict.fromkeys(u for u in found if u.strip()))
    return [u for u in unique if not any(u != other and u in other for other in unique)]


def sentences(text: str) -> list[Sentence]:
    """``text`` as sentences, each flagged as obligation/decision, with its units."""
    if _salient is not None:
        obligations = {o.sentence for o in _salient.obligations(text)}
        raw = list(_salient.sentences(text))
    else:
        obligations = None
        raw = [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]
    out = []
    for sentence in raw:
        sentence = " ".join(sentence.split())
        if not sentence:
            continue
        is_obligation = (
            sentence in obligations if obligations is not None else bool(_OBLIGATION.search(sentence))
        )
        out.append(
            Sentence(sentence, is_obligation, bool(_DECISION.search(sentence)), tuple(units(sentence)))
        )
    return out
