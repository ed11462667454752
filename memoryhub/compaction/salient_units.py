"""What extractive-v3 asks of the salient extractor: the units and obligation sentences of a text.

``memoryhub.core.salient`` is the one extractor (Unicode-aware, any genre). Only the compactor uses
this adapter; the quality benchmark's truth is the generator's labels, never this code.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryhub.core import salient
from memoryhub.core.quality import TOKEN_CLASSES, extract

_DECISION_KINDS = frozenset({"decision", "approval"})


@dataclass(frozen=True)
class Sentence:
    text: str
    obligation: bool
    decision: bool
    units: tuple[str, ...]


def units(text: str) -> list[str]:
    """The salient units of ``text`` in order of appearance, without duplicates.

    The union of the general extractor and the token classes the deployed validators measure
    (``memoryhub.core.quality.extract``), so a summary keeps what either will look for; a legacy
    token inside a longer unit is left out (kept alone it would read as a new token).
    """
    found = list(dict.fromkeys(u.text for u in salient.units(text)))
    classic = extract(text)
    extra: list[str] = []
    for name in TOKEN_CLASSES:
        extra += sorted(classic[name], key=lambda t: (text.find(t), t))
    extra = [t for t in dict.fromkeys(extra) if t.strip() and t in text and t not in found]
    return found + [t for t in extra if not any(t in other for other in found + extra if other != t)]


def sentences(text: str) -> list[Sentence]:
    """``text`` as sentences (whitespace-collapsed), flagged obligation/decision, with their units."""
    marked = {(o.start, o.end): o for o in salient.obligations(text)}
    out = []
    for start, end in salient.sentences(text):
        sentence = " ".join(text[start:end].split())
        if not sentence:
            continue
        obligation = marked.get((start, end))
        decision = obligation is not None and obligation.kind in _DECISION_KINDS
        out.append(
            Sentence(sentence, obligation is not None and not decision, decision, tuple(units(sentence)))
        )
    return out
