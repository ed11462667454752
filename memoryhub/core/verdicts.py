"""rules-7 verdicts on a summary (pure Python, no Django): what it kept, dropped, invented or changed.

Everything here reads text through ``memoryhub.core.salient`` (one extractor for any text), so a
verdict does not depend on the shapes one generator emits:

* **units** — every salient unit of the covered events is *kept* (the summary states it),
  *declared* (the summary's ``dropped`` manifest names it under its source seq) or *lost* silently.
* **obligations** — every sentence that obliges, forbids, decides, approves, prefers or leaves
  something open is kept when the summary keeps its units (or most of its words) in a sentence of
  the same polarity and the same decision outcome; a "never" that became an "always" is a
  contradiction, not a keep.
* **fabricated** — a unit of the summary that no covered event nor the prior summary states.
* **contradictions** — a summary sentence that, beside values it shares with a source sentence,
  states a different value of the same sort (order number, amount, date, carrier) where the source
  had another, a flipped polarity or a reversed decision: reported with both values.

Opaque content (provider-encrypted) is not judged here: callers show "unknown".
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memoryhub.core import salient
from memoryhub.core.salient import Obligation, Unit

if TYPE_CHECKING:  # types only
    from memoryhub.compaction.types import SourceEvent

DROPPED_KEY = "dropped"
DROP_KINDS = ("obligation", "decision", "open_item", "unit", "narrative")
# Sorts of value that may replace one another in the same sentence role.
SORTS: dict[str, str] = {
    "number": "value",
    "money": "money",
    "quantity": "value",
    "date": "when",
    "time": "clock",  # a time of day never stands in for a date ("2026-03-11 … 08:11")
    "identifier": "id",
    "path": "id",
    "symbol": "id",
    "url": "where",
    "email": "where",
    "name": "name",
    "quoted": "quoted",
}
# Decision outcomes that reverse one another (a decision "replacement" must not become "refund").
OUTCOME_PAIRS: tuple[tuple[str, str], ...] = (
    ("replacement", "refund"),
    ("approved", "rejected"),
    ("approve", "reject"),
    ("accepted", "declined"),
    ("accept", "decline"),
    ("enable", "disable"),
    ("enabled", "disabled"),
    ("keep", "remove"),
    ("allow", "deny"),
    ("allowed", "denied"),
    ("merge", "revert"),
    ("ship", "hold"),
    ("rollback", "rollout"),
    ("most", "least"),
    ("maximum", "minimum"),
    ("höchstens", "mindestens"),
    ("まで", "以上"),
    ("以下", "以上"),
    ("always", "never"),
    ("genehmigt", "abgelehnt"),
    ("erstattung", "ersatz"),
    ("承認", "却下"),
    ("返金", "交換"),
)
_OPPOSITE = {a: b for a, b in OUTCOME_PAIRS} | {b: a for a, b in OUTCOME_PAIRS}
_TOOL_ROLES = frozenset({"tool"})
_TOOL_KINDS = frozenset({"tool_result", "tool_output", "observation"})
_MAX_LISTED = 10


# -- the summary's own text and its manifest -----------------------------------------------------

_ENUM_KEYS = frozenset({"kind", "state", "schema"})


def _strings(value: Any, key: str = "") -> Iterable[str]:
    if isinstance(value, str):
        if key not in _ENUM_KEYS:
            yield value
    elif isinstance(value, Mapping):
        for k, item in value.items():
            if k != DROPPED_KEY:
                yield from _strings(item, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)


def claim_text(content: Any) -> str:
    """What a summary claims: every string of its content except enums and the ``dropped``
    manifest (a dropped unit is declared, not kept)."""
    return "\n".join(_strings(content))


@dataclass(frozen=True)
class Drop:
    seq: int
    kind: str
    text: str
    units: tuple[str, ...]
    pos: int = 0  # index in the manifest list

    @property
    def seqs(self) -> range:
        """One seq, or the range an aggregated entry names: text "seqs 11-40: …" (the form
        extractive-v3 writes when listing every drop would not fit the budget)."""
        if self.text.startswith(_RANGE_PREFIX):
            first, _, last = self.text[len(_RANGE_PREFIX) :].split(":", 1)[0].strip().partition("-")
            if first.isdigit() and last.isdigit() and int(first) <= self.seq <= int(last):
                return range(int(first), int(last) + 1)
        return range(self.seq, self.seq + 1)

    @property
    def unnamed_units(self) -> bool:
        """An aggregated ``unit`` entry that names no unit: it declares every unit of its seqs
        (shown as declared by range, not as named)."""
        return self.kind == "unit" and not self.units and len(self.seqs) > 1

    def names(self, unit_text: str, norm: str) -> bool:
        """Whether the entry names the unit: in its list, or in the dropped sentence its text quotes
        (an aggregated entry's text is a seq range and a count, not a quote)."""
        quoted = bool(unit_text) and not self.text.startswith(_RANGE_PREFIX) and unit_text in self.text
        return unit_text in self.units or norm in self.units or quoted

    def aggregates(self, what: str) -> bool:
        """Whether this is an aggregated entry (a seq range naming nothing) of units or of
        sentences (obligations, decisions, open items)."""
        if self.units or not self.text.startswith(_RANGE_PREFIX):
            return False
        return self.kind == "unit" if what == UNITS else self.kind in SENTENCE_DROP_KINDS

    @property
    def census(self) -> str | None:
        """The census an aggregated entry states of what it declares without naming it ("seqs
        3-196: 51 units not listed (census 1f0c9a2e)"), or None."""
        m = _CENSUS.search(self.text)
        return m.group(0) if m else None


_RANGE_PREFIX = "seqs "
UNITS, SENTENCES = "units", "sentences"
SENTENCE_DROP_KINDS = frozenset({"obligation", "decision", "open_item"})
_CENSUS = re.compile(r"(?<!\d)\d{1,9} (?:units|sentences) not listed \(census [0-9a-f]{8}\)")


def census_note(what: str, keys: Iterable[str]) -> str:
    """What an aggregated entry says of the units or sentences it declares: their number and a
    digest of them, so one lost beside them does not read as declared (rules-8)."""
    ordered = sorted(set(keys))
    digest = hashlib.sha256("\n".join(ordered).encode()).hexdigest()[:8]
    return f"{len(ordered)} {what} not listed (census {digest})"


def manifest(content: Any) -> list[Drop]:
    """The summary's ``dropped`` manifest (malformed entries are ignored here; the schema check
    reports them)."""
    raw = content.get(DROPPED_KEY) if isinstance(content, Mapping) else None
    drops = []
    for pos, entry in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("seq"), int):
            continue
        units = entry.get("units")
        drops.append(
            Drop(
                seq=entry["seq"],
                kind=str(entry.get("kind", "")),
                text=str(entry.get("text", "")),
                units=tuple(u for u in units if isinstance(u, str)) if isinstance(units, list) else (),
                pos=pos,
            )
        )
    return drops


def manifest_errors(content: Any) -> list[str]:
    """What is wrong with a ``dropped`` manifest's shape (absent is fine)."""
    if not isinstance(content, Mapping) or DROPPED_KEY not in content:
        return []
    raw = content[DROPPED_KEY]
    if not isinstance(raw, list):
        return ["dropped must be a list of {seq, kind, text, units}"]
    errors = []
    for i, entry in enumerate(raw):
        where = f"dropped[{i}]"
        if not isinstance(entry, Mapping):
            errors.append(f"{where} must be an object")
            continue
        if not isinstance(entry.get("seq"), int) or isinstance(entry.get("seq"), bool):
            errors.append(f"{where}.seq must be an integer")
        if entry.get("kind") not in DROP_KINDS:
            errors.append(f"{where}.kind must be one of {', '.join(DROP_KINDS)}")
        if not isinstance(entry.get("text", ""), str):
            errors.append(f"{where}.text must be a string")
        units = entry.get("units", [])
        if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
            errors.append(f"{where}.units must be a list of strings")
    return errors


# -- the evidence: covered events and the prior summary --------------------------------------------


@dataclass(frozen=True)
class SourceSentence:
    seq: int
    text: str
    units: tuple[Unit, ...]
    words: frozenset[str]


@dataclass
class Evidence:
    """Salient units (first seq per value), obligations and sentences of the covered events."""

    units: dict[tuple[str, str], tuple[int, Unit]] = field(default_factory=dict)
    seqs_of: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    obligations: list[tuple[int, Obligation]] = field(default_factory=list)
    sentences: list[SourceSentence] = field(default_factory=list)
    known_units: list[Unit] = field(default_factory=list)  # events + prior summary + facts
    known_text: str = ""
    known_chunks: set[str] = field(default_factory=set)
    # role word → the values the source labelled with it: (norm, as written, seq)
    roles: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    max_seq: int = 0

    def grounded(self, unit: Unit) -> bool:
        """Whether a covered event or the prior summary states ``unit``."""
        if unit.text in self.known_chunks or unit.norm in self._norms:
            return True
        if salient.contains(self.known_units, self.known_text, unit):
            return True
        # p50/p99/error: a slash-joined shorthand of grounded parts invents nothing
        parts = [p for p in unit.text.split("/") if p]
        if len(parts) > 1 and all(p in self.known_chunks for p in parts):
            return True
        if unit.kind == "name":  # "Reviewer (Tomasz Wierzbicki)" restated "Reviewer Tomasz Wierzbicki"
            words = _NAME_WORD.findall(unit.text.casefold())
            return bool(words) and all(w in self._name_words for w in words)
        return False

    @property
    def _name_words(self) -> set[str]:
        """Every word of the covered text, case-folded ("@dev.okafor" gives dev and okafor)."""
        cached = self.__dict__.get("_name_word_cache")
        if cached is None:
            cached = set(_NAME_WORD.findall(self.known_text.casefold()))
            self.__dict__["_name_word_cache"] = cached
        return cached

    @property
    def _norms(self) -> set[str]:
        cached = self.__dict__.get("_norm_cache")
        if cached is None:
            cached = salient.values(self.known_units)
            self.__dict__["_norm_cache"] = cached
        return cached


_NAME_WORD = re.compile(r"[^\W\d_]+")


def _words(text: str) -> frozenset[str]:
    """Distinctive words: Latin words of 4+ letters, CJK runs of 2+ characters (lower-cased)."""
    out = set()
    for chunk, _, _ in salient.chunks(text):
        w = chunk.lower()
        if w.isalpha() and len(w) >= (4 if w.isascii() else 2) and w not in _STOP:
            out.add(w)
    return frozenset(out)


_STOP = frozenset(
    [
        "that",
        "this",
        "with",
        "from",
        "have",
        "will",
        "when",
        "then",
        "than",
        "they",
        "their",
        "there",
        "were",
        "been",
        "into",
        "each",
        "also",
        "such",
        "over",
        "under",
        "after",
        "before",
        "while",
        "about",
        "which",
        "would",
        "could",
        "should",
        "shall",
        "other",
        "those",
        "these",
        "what",
        "where",
        "some",
        "more",
        "most",
        "very",
        "just",
        "like",
        "does",
        "done",
        "make",
        "made",
        "must",
        "never",
        "only",
        "until",
        "always",
        "need",
        "needs",
        "required",
        "ensure",
        "please",
        "muss",
        "darf",
        "nicht",
        "nur",
        "bitte",
        "werden",
        "wird",
        "sind",
        "oder",
        "eine",
        "einer",
        "einem",
        "einen",
        "kein",
        "keine",
    ]
)


def build_evidence(events: Iterable[SourceEvent], prior_content: Any = None) -> Evidence:
    """Index the covered events (purged ones contribute nothing) and the prior summary."""
    ev = Evidence()
    texts = []
    for event in sorted(events, key=lambda e: e.seq):
        ev.max_seq = max(ev.max_seq, event.seq)
        if event.purged:
            continue
        text = "\n".join(p for p in [event.content, *event.refs] if p)
        facts_text = "\n".join(f"{f.get('key', '')} {f.get('text', '')}" for f in event.facts)
        found = salient.units(text)
        for u in found:
            key = (u.kind, u.norm)
            ev.units.setdefault(key, (event.seq, u))
            ev.seqs_of.setdefault(key, set()).add(event.seq)
        ev.known_units += found + salient.units(facts_text)
        for u in found:
            role = _role_before(text, u)
            if role:
                ev.roles.setdefault(role, []).append((u.norm, u.text, event.seq))
        texts += [text, facts_text]
        for s, e in salient.sentences(text):
            inside = tuple(salient.within(found, s, e))
            ev.sentences.append(SourceSentence(event.seq, text[s:e], inside, _words(text[s:e])))
        if event.role not in _TOOL_ROLES and event.kind not in _TOOL_KINDS:
            seen = {o.sentence for _, o in ev.obligations}
            ev.obligations += [(event.seq, o) for o in salient.obligations(text) if o.sentence not in seen]
        texts.append(" ".join(w for w in (event.agent, event.role, event.kind, event.tool_call_id) if w))
    if prior_content is not None:
        prior = claim_text(prior_content)
        ev.known_units += salient.units(prior)
        texts.append(prior)
    ev.known_text = "\n".join(texts)
    all_chunks = [c for c, _, _ in salient.chunks(ev.known_text)]
    ev.known_chunks = set(all_chunks)
    # A word is a label only when the source uses it for nothing else ("注文番号", "tracking"):
    # "sent" in "as sent" and "sent TC-02" is a verb, and a swap under it proves nothing.
    uses = Counter(c.lower() for c in all_chunks if c.lower() in ev.roles)
    ev.roles = {word: seen for word, seen in ev.roles.items() if len(seen) >= uses[word]}
    return ev


# -- the verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitVerdict:
    seq: int
    unit: Unit
    state: str  # kept | declared | lost


@dataclass(frozen=True)
class ObligationVerdict:
    seq: int
    obligation: Obligation
    state: str  # kept | declared | lost | contradicted
    why: str = ""
    by_range: int | None = None  # the aggregated entry (index in the manifest) declaring it


@dataclass(frozen=True)
class Contradiction:
    seq: int  # the source sentence's seq
    was: str  # the grounded value (or wording)
    now: str  # what the summary states instead
    sentence: str  # the summary sentence


@dataclass
class Verdict:
    units: list[UnitVerdict]
    obligations: list[ObligationVerdict]
    fabricated: list[Unit]
    contradictions: list[Contradiction]
    # rules-8: aggregated entries whose census does not match what is missing in their seqs
    census_problems: list[str] = field(default_factory=list)
    census: dict[int, str] = field(default_factory=dict)  # sealing: manifest index → census to state

    def by_kind(self) -> dict[str, dict[str, Any]]:
        """Per unit kind: total, kept, declared, lost (with the lost values listed)."""
        out: dict[str, dict[str, Any]] = {}
        for v in self.units:
            row = out.setdefault(
                v.unit.kind, {"total": 0, "kept": 0, "declared": 0, "lost": 0, "missing": []}
            )
            row["total"] += 1
            row[v.state] += 1
            if v.state == "lost":
                row["missing"].append(f"{v.unit.text} (seq {v.seq})")
        return out

    def silent_losses(self) -> list[UnitVerdict]:
        return [v for v in self.units if v.state == "lost"]

    def to_dict(self) -> dict[str, Any]:
        kinds = self.by_kind()
        return {
            "units": {
                k: {
                    **{n: r[n] for n in ("total", "kept", "declared", "lost")},
                    "ratio": round((r["kept"] + r["declared"]) / r["total"], 4) if r["total"] else None,
                    "missing": r["missing"][:_MAX_LISTED],
                }
                for k, r in sorted(kinds.items())
            },
            "obligations": [
                {"seq": o.seq, "state": o.state, "sentence": o.obligation.sentence[:200], "why": o.why}
                for o in self.obligations
                if o.state != "kept"
            ][:_MAX_LISTED],
            "obligations_total": len(self.obligations),
            "obligations_kept": sum(1 for o in self.obligations if o.state == "kept"),
            "fabricated": [{"kind": u.kind, "token": u.text} for u in self.fabricated[:_MAX_LISTED]],
            "fabricated_count": len(self.fabricated),
            "contradictions": [
                {"seq": c.seq, "was": c.was, "now": c.now, "sentence": c.sentence[:200]}
                for c in self.contradictions[:_MAX_LISTED]
            ],
        }


@dataclass(frozen=True)
class _SummarySentence:
    text: str  # a clause (sentences split at semicolons)
    units: tuple[Unit, ...]
    words: frozenset[str]
    polarity: str
    context: str = ""  # the whole sentence the clause belongs to
    context_values: frozenset[str] = frozenset()  # the values that whole sentence states


def judge(
    evidence: Evidence, content: Any, *, up_to: int | None = None, census: bool = False, mode: str = ""
) -> Verdict:
    """Judge ``content`` against ``evidence`` (``up_to``: only source seqs ≤ it are owed).

    ``census`` (rules-8): an aggregated unit entry declares the units of its seqs only when it
    states their census and the census is exact; rules-7 takes such a range as declaring every
    unit of its seqs (so a unit lost beside them read as declared).
    """
    text = claim_text(content)
    found = salient.units(text)
    drops = manifest(content)
    mode = mode or (CENSUS if census else RULES_7_RANGES)
    states = unit_states(evidence, text, found, drops, up_to=up_to, mode=mode)
    spans = salient.full_sentences(text)
    summary_sentences = []
    for s, e in salient.clauses(text):
        a, b = next(((a, b) for a, b in spans if a <= s and e <= b), (s, e))
        summary_sentences.append(
            _SummarySentence(
                text[s:e],
                tuple(salient.within(found, s, e)),
                _words(text[s:e]),
                salient.polarity(text[s:e]),
                text[a:b],
                frozenset(salient.values(salient.within(found, a, b))),
            )
        )

    unit_verdicts = [UnitVerdict(seq, unit, state) for _key, seq, unit, state, _range in states]

    ob_verdicts = []
    for seq, ob in evidence.obligations:
        if up_to is not None and seq > up_to:
            continue
        ob_verdicts.append(_obligation_verdict(seq, ob, found, text, summary_sentences, drops, mode))
    if mode == SEALING:  # a compactor sealing its manifest needs only what the ranges declare
        seal = {drops[i].pos: note for i, note in _declared_by_range(drops, states, ob_verdicts).items()}
        return Verdict(unit_verdicts, ob_verdicts, [], [], [], seal)
    census_problems = _census_problems(drops, states, ob_verdicts) if mode == CENSUS else []

    fabricated = []
    seen = set()
    for u in found:
        if (u.kind, u.norm) in seen or evidence.grounded(u):
            continue
        seen.add((u.kind, u.norm))
        fabricated.append(u)
    contradictions = _contradictions(evidence, summary_sentences, ob_verdicts)
    seen_pairs = {(c.was, c.now) for c in contradictions}
    contradictions += [
        c
        for c in _role_contradictions(evidence, text, found)
        if not any(c.now.endswith(n) for _, n in seen_pairs)
    ]
    return Verdict(unit_verdicts, ob_verdicts, fabricated, contradictions, census_problems)


# How aggregated entries declare: rules-7 takes a unit range as declaring every unit of its seqs;
# rules-8 only a range that states its census (checked); sealing computes the census to state.
RULES_7_RANGES, CENSUS, SEALING = "rules-7", "census", "sealing"


def _aggregated(drops: list[Drop], what: str, mode: str) -> list[int]:
    if mode == RULES_7_RANGES:
        return [i for i, d in enumerate(drops) if what == UNITS and d.unnamed_units]
    return [i for i, d in enumerate(drops) if d.aggregates(what) and (mode == SEALING or d.census)]


def _first_range(drops: list[Drop], ranges: list[int], seqs: Iterable[int]) -> int | None:
    seqs = list(seqs)
    return next((i for i in ranges if any(x in drops[i].seqs for x in seqs)), None)


def unit_states(
    evidence: Evidence,
    text: str,
    found: list[Unit],
    drops: list[Drop],
    *,
    up_to: int | None = None,
    mode: str = RULES_7_RANGES,
) -> list[tuple[tuple[str, str], int, Unit, str, int | None]]:
    """(key, seq, unit, kept|declared|lost, the aggregated entry declaring it) for every unit owed.

    A unit is declared by an entry that names it, else by the first aggregated entry covering one
    of its seqs (see ``mode``)."""
    ranges = _aggregated(drops, UNITS, mode)
    out = []
    for key, (seq, unit) in sorted(evidence.units.items(), key=lambda kv: (kv[1][0], kv[1][1].start)):
        if up_to is not None and seq > up_to:
            continue
        seqs = evidence.seqs_of[key]
        by_range = None
        if salient.contains(found, text, unit):
            state = "kept"
        elif any(any(x in d.seqs for x in seqs) and d.names(unit.text, unit.norm) for d in drops):
            state = "declared"
        else:
            by_range = _first_range(drops, ranges, seqs)
            state = "lost" if by_range is None else "declared"
        out.append((key, seq, unit, state, by_range))
    return out


def _unit_key(key: tuple[str, str]) -> str:
    return f"{key[0]}:{key[1]}"


def _sentence_key(o: ObligationVerdict) -> str:
    return f"{o.seq}:{' '.join(o.obligation.sentence.split())}"


def census_notes(evidence: Evidence, content: Any) -> dict[int, str]:
    """For each aggregated entry of ``content``'s manifest (by its index in the list), the census
    it must state: what a compactor writes so rules-8 can check the entry."""
    return judge(evidence, content, mode=SEALING).census


def _declared_by_range(drops: list[Drop], states: list, obs: list[ObligationVerdict]) -> dict[int, str]:
    """The census each aggregated entry's declarations add up to."""
    keys: dict[int, list[str]] = {}
    for key, _seq, _unit, _state, by_range in states:
        if by_range is not None:
            keys.setdefault(by_range, []).append(_unit_key(key))
    for o in obs:
        if o.by_range is not None:
            keys.setdefault(o.by_range, []).append(_sentence_key(o))
    out = {}
    for i, d in enumerate(drops):
        for what in (UNITS, SENTENCES):
            if d.aggregates(what):
                out[i] = census_note(what, keys.get(i, []))
    return out


def _census_problems(drops: list[Drop], states: list, obs: list[ObligationVerdict]) -> list[str]:
    actual = _declared_by_range(drops, states, obs)
    out = []
    for i, d in enumerate(drops):
        if d.census is None or i not in actual or actual[i] == d.census:
            continue
        what = UNITS if d.kind == "unit" else SENTENCES
        counted = int(d.census.split(" ", 1)[0])
        missing = int(actual[i].split(" ", 1)[0])
        out.append(
            f"seqs {d.seqs[0]}-{d.seqs[-1]}: the manifest counts {counted} {what} not listed, {missing} of "
            f"these seqs are missing{' (not the same ones)' if counted == missing else ''}: "
            f"{'one was' if abs(counted - missing) <= 1 else 'some were'} lost without being declared"
        )
    return out


def _best_sentence(units: tuple[Unit, ...], words: frozenset[str], sentences: list[_SummarySentence]):
    """The summary sentence that states most of ``units`` (then most of ``words``)."""
    best, best_score = None, 0.0
    norms = {u.norm for u in units}
    for s in sentences:
        shared_units = len(
            norms & {u.norm for u in s.units} | {n for n in norms if n in salient.values(list(s.units))}
        )
        score = 2 * shared_units + len(words & s.words) / (len(words) or 1)
        if score > best_score:
            best, best_score = s, score
    return best


def _obligation_verdict(seq, ob, found, text, sentences, drops, mode=RULES_7_RANGES) -> ObligationVerdict:
    words = _words(ob.sentence)
    if ob.units:
        missing = [u for u in ob.units if not salient.contains(found, text, u)]
        # its values kept, and restated: a clause with them that keeps half its words (a decision
        # whose part number survives elsewhere is still lost when the decision sentence is gone)
        best = _best_sentence(ob.units, words, sentences)
        restated = best is not None and _restates(ob, words, best) and _states_all(ob.units, best)
        kept_content = not missing and restated
        if not missing and not restated:
            missing = []
    else:
        missing = []
        best = _best_sentence((), words, sentences)
        kept_content = bool(best) and (not words or len(words & best.words) >= 0.6 * len(words))
    if not kept_content:
        names = [u.text for u in missing]
        if any(
            seq in d.seqs and (ob.sentence[:40] in d.text or (names and all(d.names(n, n) for n in names)))
            for d in drops
        ):
            return ObligationVerdict(seq, ob, "declared")
        by_range = _first_range(drops, _aggregated(drops, SENTENCES, mode), [seq])
        if by_range is not None:
            return ObligationVerdict(seq, ob, "declared", by_range=by_range)
        lost = ", ".join(names) if names else "its wording"
        near = _best_sentence((), words, sentences)
        flip = _outcome_flip(ob.sentence, near.text) if near is not None else None
        also = f"; decision {flip[0]} → {flip[1]}" if flip else ""
        return ObligationVerdict(seq, ob, "lost", f"lost {lost}{also}")
    best = _best_sentence(ob.units, words, sentences)
    if best is not None and _flipped(ob.polarity, best):
        if ob.polarity == "negative" and not salient.obligations(best.context or best.text):
            # restated without its "never"/"do not" and without a cue of its own: the rule is lost
            return ObligationVerdict(
                seq, ob, "lost", f"polarity lost («{ob.cue}» dropped): {best.text[:120]}"
            )
        return ObligationVerdict(
            seq, ob, "contradicted", f"polarity {ob.polarity} → {best.polarity}: {best.text[:120]}"
        )
    if best is not None:
        flip = _outcome_flip(ob.sentence, best.text)
        if flip:
            return ObligationVerdict(
                seq, ob, "contradicted", f"decision {flip[0]} → {flip[1]}: {best.text[:120]}"
            )
    return ObligationVerdict(seq, ob, "kept")


# Any negation at all: a forbidding sentence restated without one has lost its "not".
_ANY_NEGATION = re.compile(
    r"(?i)\b(?:not|no|nothing|none|never|without|nicht|nichts|nie|kein\w*|ohne|"
    r"ne|pas|jamais|rien|aucune?|sans|interdite?s?|nunca|jamás|nada|ningún|ninguna|sin|prohibid[oa]s?)\b"
    r"|n['’]t\b|\bn['’](?=\w)|ない|禁止|不可|ず|不|没|无|别|勿"
)


def _flipped(source_polarity: str, restated: _SummarySentence) -> bool:
    """A forbidding sentence restated without any negation ("Do not page" → "page"), or an
    obliging one restated with a binding negation ("must" → "must not", "never" ← "always").
    "must not create anything" kept as "creates nothing" flips nothing."""
    if source_polarity == "negative":
        return not _ANY_NEGATION.search(restated.context or restated.text)
    return restated.polarity == "negative"


def _states_all(units: tuple[Unit, ...], clause: _SummarySentence) -> bool:
    """Whether the clause (or its sentence) states every one of ``units``: "POST /v1/refunds must
    return 422" is not kept by "/v1/refunds … 409" in one line and "… 422" in another."""
    context = clause.context or clause.text
    found = salient.units(context)
    return all(salient.contains(found, context, u) for u in units)


def _restates(ob: Obligation, words: frozenset[str], clause: _SummarySentence) -> bool:
    """Whether ``clause`` restates ``ob``: half its words, or all its values with a quarter of its
    words (a paraphrase) — and a decision or approval restated as one (its part number surviving
    in another sentence does not keep the decision)."""
    if len(words) < 2:
        return True
    shared = len(words & (clause.words | _words(clause.context))) / len(words)
    if shared >= 0.5:
        return True
    norms = {u.norm for u in clause.units}
    if shared < 0.25 or not all(u.norm in norms for u in ob.units):
        return False
    return ob.kind not in ("decision", "approval") or any(
        o.kind == ob.kind for o in salient.obligations(clause.context or clause.text)
    )


def _lower_words(text: str) -> set[str]:
    return {c.lower() for c, _, _ in salient.chunks(text)} | {
        k for k in _OPPOSITE if not k.isascii() and k in text
    }


def _outcome_flip(source: str, summary: str) -> tuple[str, str] | None:
    """A decision outcome of ``source`` replaced by its opposite in ``summary``: a known pair
    (approved → rejected), or a choice turned round ("a replacement, not a refund" restated as "a
    refund, not a replacement")."""
    src, out = _lower_words(source), _lower_words(summary)
    for word in src:
        opposite = _OPPOSITE.get(word)
        if opposite and opposite not in src and opposite in out and word not in out:
            return word, opposite
    return _choice_reversed(source, summary, src, out)


# What follows a negation is what was ruled out: "not a refund", "instead of a refund", "statt einer
# Erstattung", "返金ではなく" (the word before ではなく).
_RULED_OUT = re.compile(
    r"(?i)\b(?:not|never|instead\s{1,3}of|rather\s{1,3}than|nicht|statt|anstatt)\s{1,3}"
    r"(?:(?:a|an|the|any|ein|eine|einen|einer|einem|der|die|das|den)\s{1,3})?(\w{1,40})"
)
# bounded: a lazy unbounded word before the cue would rescan a long run of text from every start
_RULED_OUT_JA = re.compile(r"(\w{1,12}?)(?:ではなく|じゃなく|ではない)")


def _ruled_out(text: str) -> set[str]:
    return {m.group(1).lower() for m in _RULED_OUT.finditer(text)} | {
        m.group(1) for m in _RULED_OUT_JA.finditer(text)
    }


def _choice_reversed(source: str, summary: str, src: set[str], out: set[str]) -> tuple[str, str] | None:
    """The option the source chose is ruled out in ``summary`` and the one it ruled out is chosen."""
    src_no, out_no = _ruled_out(source), _ruled_out(summary)

    def stated(word: str, words: set[str], text: str) -> bool:  # CJK words are not space-split
        return word in words if word.isascii() else word in text

    now_excluded = sorted(w for w in out_no - src_no if stated(w, src, source) and len(w) > 1)
    now_chosen = sorted(w for w in src_no - out_no if stated(w, out, summary) and len(w) > 1)
    if now_excluded and now_chosen:
        return now_excluded[0], now_chosen[0]
    return None


def _contradictions(evidence: Evidence, sentences: list[_SummarySentence], obs: list[ObligationVerdict]):
    """Values of a summary sentence that replace, in the same role, a value of the source sentence
    it restates (the source sentence sharing most values with it, then the rest of its event)."""
    out = [
        Contradiction(o.seq, o.obligation.sentence[:120], o.why, o.why.split(": ", 1)[-1])
        for o in obs
        if o.state == "contradicted"
    ]
    for s in sentences:
        if not s.units:
            continue
        s_norms = {u.norm for u in s.units}
        s_values = salient.values(list(s.units))
        best, best_shared = None, 0
        for src in evidence.sentences:
            shared = len(s_norms & salient.values(list(src.units)))
            if shared > best_shared:
                best, best_shared = src, shared
        if best is None:
            continue
        best_values = salient.values(list(best.units))
        same_event = [
            u for src in evidence.sentences if src.seq == best.seq and src is not best for u in src.units
        ]
        for u in s.units:
            if u.norm in best_values or u.text in best.text:
                continue
            if evidence.grounded(u) and _at_home(evidence, u, s_norms):
                continue  # stated elsewhere beside other values of this sentence: a merge, not a swap
            sort = SORTS.get(u.kind)
            # Against the clause it restates, a value in another's place is a swap; against the
            # rest of that event, a value the summary's whole sentence still states was regrouped,
            # not replaced ("07:52 deploy started; 08:11 paged" → "started at 07:52; … paged at 08:11").
            for pool, restated in ((best.units, s_values), (tuple(same_event), s_values | s.context_values)):
                rivals = [
                    r
                    for r in pool
                    if SORTS.get(r.kind) == sort
                    and r.norm not in s_norms
                    and r.norm not in restated
                    and r.text not in s.context  # still written there, in words no unit holds
                ]
                if rivals:
                    out.append(Contradiction(best.seq, rivals[0].text, u.text, s.text[:200]))
                    break
    return out


def _role_contradictions(evidence: Evidence, text: str, found: list[Unit]) -> list[Contradiction]:
    """A value the summary labels with a word (its role: "order", "tracking", "追跡番号") that the
    source used only for other values of the same sort: order number and tracking number swapped."""
    out = []
    for u in found:
        role = _role_before(text, u)
        known = evidence.roles.get(role) if role else None
        if not known or any(n == u.norm for n, _, _ in known):
            continue
        # only a value the source itself labelled otherwise ("追跡番号" where it said "注文番号")
        if not any(n == u.norm for labelled in evidence.roles.values() for n, _, _ in labelled):
            continue
        rivals = [
            (n, shown, seq)
            for n, shown, seq in known
            if n != u.norm and SORTS.get(_kind_of(evidence, n)) == SORTS.get(u.kind)
        ]
        if rivals:
            _, shown, seq = rivals[0]
            out.append(Contradiction(seq, f"{role} {shown}", f"{role} {u.text}", _around(text, u)))
    return out


def _kind_of(evidence: Evidence, norm: str) -> str:
    return next((kind for kind, n in evidence.units if n == norm), "")


def _around(text: str, unit: Unit) -> str:
    return text[max(0, unit.start - 60) : unit.end + 60]


_ROLE_SKIP = frozenset(
    [
        "の",
        "は",
        "が",
        "を",
        "に",
        "で",
        "と",
        "も",
        "へ",
        "や",
        "a",
        "an",
        "the",
        "is",
        "was",
        "of",
        "for",
        "with",
        "its",
        "their",
        "our",
        "your",
    ]
)


def _role_before(text: str, unit: Unit) -> str | None:
    """The word right before ``unit`` (particles and articles skipped), lower-cased, if it can name
    a role: a Latin word of 3+ letters or a CJK word of 2+ characters, not a stop word."""
    window = text[max(0, unit.start - 40) : unit.start]
    before = salient.chunks(window)
    while before and before[-1][0].lower() in _ROLE_SKIP:
        before.pop()
    if not before or len(window) - before[-1][2] > 3:  # the label right before the value
        return None
    if salient.is_unit(before[-1][0]):  # a value (operationId, BHD) is no label
        return None
    word = before[-1][0].lower()
    if not word.isalpha() or len(word) < (3 if word.isascii() else 2) or word in _STOP:
        return None
    return word


def _at_home(evidence: Evidence, unit: Unit, s_norms: set[str]) -> bool:
    """Whether a source sentence that states ``unit`` also states another value of the summary
    sentence (or ``unit`` stands alone there): the summary merged sentences, it did not swap."""
    homes = [src for src in evidence.sentences if unit.norm in salient.values(list(src.units))]
    return not homes or any(({x.norm for x in src.units} - {unit.norm}) & s_norms for src in homes)


# -- the validator's checks -----------------------------------------------------------------------


def _listed(items: list[str]) -> str:
    more = len(items) - _MAX_LISTED
    return ", ".join(items[:_MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _quote(sentence: str) -> str:
    flat = " ".join(sentence.split())
    return f"«{flat[:100]}{'…' if len(flat) > 100 else ''}»"


def problems(
    verdict: Verdict, floors: Mapping[str, float], max_fabricated: int
) -> list[tuple[str, list[str], str]]:
    """rules-7's checks in order: (name, problems, detail when it passes)."""
    out: list[tuple[str, list[str], str]] = []
    rows = verdict.by_kind()
    unit_problems = []
    for kind, row in sorted(rows.items()):
        accounted = row["kept"] + row["declared"]
        floor = floors.get(f"unit_{kind}", 1.0)
        if row["total"] and accounted / row["total"] < floor:
            unit_problems.append(
                f"{kind} {accounted}/{row['total']} kept or declared "
                f"({accounted / row['total']:.0%} < floor {floor:.0%}); lost silently {_listed(row['missing'])}"
            )
    unit_problems += verdict.census_problems
    kept_detail = ", ".join(f"{k} {r['kept']}+{r['declared']}/{r['total']}" for k, r in sorted(rows.items()))
    out.append(("unit_retention", unit_problems, f"kept+declared {kept_detail or 'nothing to keep'}"))

    obs = verdict.obligations
    not_kept = [o for o in obs if o.state in ("lost", "contradicted")]
    accounted = sum(1 for o in obs if o.state in ("kept", "declared"))
    floor = floors.get("obligations", 1.0)
    ob_problems = []
    if obs and accounted / len(obs) < floor:
        ob_problems.append(
            f"{accounted}/{len(obs)} obligation sentences kept or declared (floor {floor:.0%}); "
            + _listed([f"seq {o.seq} {_quote(o.obligation.sentence)}: {o.why}" for o in not_kept])
        )
    out.append(("obligations", ob_problems, f"{accounted}/{len(obs)} obligation sentences kept or declared"))

    fab = verdict.fabricated
    fab_problems = []
    if len(fab) > max_fabricated:
        fab_problems.append(
            f"{len(fab)} unit(s) appear in no covered event or prior summary (allowed {max_fabricated}): "
            + _listed([f"{u.text} ({u.kind})" for u in fab])
        )
    out.append(("fabricated", fab_problems, f"{len(fab)} fabricated units"))

    contra = [f"seq {c.seq}: {c.was} → {c.now} in {_quote(c.sentence)}" for c in verdict.contradictions]
    out.append(
        (
            "contradictions",
            [_listed(contra)] if contra else [],
            "no value, polarity or decision contradicts the source",
        )
    )
    return out


def all_checks(verdict: Verdict, content: Any, floors: Mapping[str, float], max_fabricated: int):
    """problems() plus ``declared_drops``."""
    return [*problems(verdict, floors, max_fabricated), ("declared_drops", *declared_check(verdict, content))]


def declared_list(verdict: Verdict, content: Any) -> list[dict[str, Any]]:
    """What the summary declares it dropped and the verdicts matched to it (pointers by seq)."""
    units = [
        {"seq": u.seq, "kind": "unit", "text": u.unit.text} for u in verdict.units if u.state == "declared"
    ]
    obs = [
        {"seq": o.seq, "kind": "obligation", "text": o.obligation.sentence[:200]}
        for o in verdict.obligations
        if o.state == "declared"
    ]
    return (obs + units)[: 5 * _MAX_LISTED]


def declared_check(verdict: Verdict, content: Any) -> tuple[list[str], str]:
    """``declared_drops``: fails only on a malformed manifest; otherwise passes, with a warning
    that lists the declared drops (retrievable by seq)."""
    errors = manifest_errors(content)
    declared = declared_list(verdict, content)
    if not declared:
        return errors, "nothing declared dropped"
    seqs = sorted({d["seq"] for d in declared})
    return errors, (
        f"{len(declared)} item(s) declared dropped, retrievable from events "
        + _listed([str(s) for s in seqs])
    )
