"""Falsify a good summary on purpose, one change at a time (pure Python, no Django).

The validator's recall is measured by mutating summaries that pass and counting the mutants it
rejects *naming the changed value*. Each ``Mutation`` knows what it changed (``was`` → ``now``),
so the ground truth never comes from the validator or the extractor under test:

* ``id_digit`` / ``id_letter`` — one digit (or letter) of an identifier changed;
* ``amount`` — one digit of an amount or quantity changed;
* ``date_shift`` — a date moved by one day;
* ``swap`` — two values of the same sort exchanged (both stay grounded somewhere);
* ``polarity_flip`` — must ↔ must not, never ↔ always, muss ↔ darf nicht, こと ↔ 禁止;
* ``decision_flip`` — a decision's outcome replaced by its opposite (replacement → refund);
* ``drop_obligation`` — an obligation sentence removed.

``mutate(text, targets, obligations)`` lists every applicable mutation of ``text``; targets are
the values to change (hand labels, or any list a caller chooses), obligations are substrings of
the sentences to flip or drop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

KINDS = (
    "id_digit",
    "id_letter",
    "amount",
    "date_shift",
    "swap",
    "polarity_flip",
    "decision_flip",
    "drop_obligation",
)


@dataclass(frozen=True)
class Mutation:
    kind: str
    was: str  # the value or sentence changed
    now: str  # what replaced it ("" when dropped)
    text: str  # the mutated text


_MONTH = re.compile(
    r"(?i)\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-zä]*\b|\d{4}-\d{2}-\d{2}|\d月\d"
)
_MONEY = re.compile(r"[$€£¥]|\b(?:EUR|USD|GBP|JPY|CHF)\b")
_DAY = re.compile(r"(?<!\d)(\d{1,2})(?!\d)")
_ISO_DAY = re.compile(r"(\d{4}-\d{2}-)(\d{2})")
_DIGIT = re.compile(r"\d")
_QUANTITY = re.compile(r"\A[\d.,]+(?:\s?[^\W\d_]{1,12}|%)\Z")
_LETTER = re.compile(r"[A-Za-z]")

# Polarity flips per language: (pattern, replacement). The first that applies is used.
_POLARITY: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bmust not\b"), "must"),
    (re.compile(r"\bmust never\b"), "must always"),
    (re.compile(r"\bnever\b"), "always"),
    (re.compile(r"\bNever\b"), "Always"),
    (re.compile(r"\b[Dd]o not "), ""),
    (re.compile(r"\bmust\b"), "must not"),
    (re.compile(r"\bmay\b"), "may not"),
    (re.compile(r"\bshould\b"), "should not"),
    (re.compile(r"\bdarf nicht\b"), "muss"),
    (re.compile(r"\bmuss\b"), "darf nicht"),
    (re.compile(r"\bkeine\b"), "alle"),
    (re.compile(r"禁止"), "必須"),
    (re.compile(r"すること"), "してはならない"),
    (re.compile(r"こと(?=。|$)"), "ことは禁止"),
    (re.compile(r"まで"), "以上"),
)
_OUTCOMES = (
    ("replacement", "refund"),
    ("approved", "rejected"),
    ("Approved", "Rejected"),
    ("accepted", "declined"),
    ("enable", "disable"),
    ("keep", "remove"),
    ("merge", "revert"),
    ("Rollback", "Rollout"),
    ("genehmigt", "abgelehnt"),
    ("承認", "却下"),
)
_SENTENCE_END = re.compile(r"(?<!\d)[.!?](?:\s|$)|[。！？]|\n")  # "14. April" goes on


def _replace_first(text: str, old: str, new: str) -> str | None:
    at = text.find(old)
    return None if at < 0 or old == new else text[:at] + new + text[at + len(old) :]


def _next_digit(d: str) -> str:
    return str((int(d) + 1) % 10)


def _change_digit(value: str, last: bool) -> str | None:
    digits = list(_DIGIT.finditer(value))
    if not digits:
        return None
    m = digits[-1] if last else next((d for d in digits if d.group(0) != "0"), digits[0])
    return value[: m.start()] + _next_digit(m.group(0)) + value[m.end() :]


def _change_letter(value: str, last: bool = True) -> str | None:
    letters = list(_LETTER.finditer(value))
    if not letters:
        return None
    m = letters[-1] if last else letters[0]
    c = m.group(0)
    new = "a" if c.lower() == "z" else chr(ord(c.lower()) + 1)
    return value[: m.start()] + (new.upper() if c.isupper() else new) + value[m.end() :]


def _shift_date(value: str) -> str | None:
    iso = _ISO_DAY.search(value)
    if iso:
        day = int(iso.group(2))
        return value[: iso.start(2)] + f"{day % 28 + 1:02d}" + value[iso.end(2) :]
    m = _DAY.search(value)
    if not m:
        return None
    return value[: m.start()] + str(int(m.group(1)) % 28 + 1) + value[m.end() :]


def _sort(value: str) -> str:
    if _MONTH.search(value):
        return "date"
    if _MONEY.search(value):
        return "money"
    if _QUANTITY.match(value):
        return "quantity"
    if _DIGIT.search(value) and _LETTER.search(value):
        return "id"
    if _DIGIT.search(value):
        return "number"
    return "word"


def _sentence_around(text: str, at: int) -> tuple[int, int]:
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, at):
        start = m.end()
    end_m = _SENTENCE_END.search(text, at)
    return start, end_m.end() if end_m else len(text)


def value_mutations(text: str, targets: Iterable[str]) -> list[Mutation]:
    out = []
    for value in dict.fromkeys(targets):
        if value not in text:
            continue
        sort = _sort(value)
        candidates: list[tuple[str, str | None]] = []
        if sort == "date":
            candidates.append(("date_shift", _shift_date(value)))
        elif sort in ("money", "number", "quantity"):
            candidates += [
                ("amount", _change_digit(value, last=False)),
                ("amount", _change_digit(value, last=True)),
            ]
        elif sort == "id":
            candidates += [
                ("id_digit", _change_digit(value, last=True)),
                ("id_digit", _change_digit(value, last=False)),
                ("id_letter", _change_letter(value, last=True)),
                ("id_letter", _change_letter(value, last=False)),
            ]
        else:
            candidates += [
                ("id_letter", _change_letter(value, last=True)),
                ("id_letter", _change_letter(value, last=False)),
            ]
        candidates = list(dict.fromkeys(candidates))  # first and last may be the same change
        for kind, new in candidates:
            mutated = _replace_first(text, value, new) if new else None
            if mutated is not None and new is not None:
                out.append(Mutation(kind, value, new, mutated))
    return out


def swap_mutations(text: str, targets: Sequence[str]) -> list[Mutation]:
    """Exchange two values of the same sort (money with money, date with date, id with id)."""
    present = [t for t in dict.fromkeys(targets) if text.count(t) == 1]
    out = []
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            if _sort(a) != _sort(b) or _sort(a) not in ("money", "date", "id") or a in b or b in a:
                continue
            if _sort(a) == "date" and ("".join(_DIGIT.findall(a)).endswith("".join(_DIGIT.findall(b)))):
                continue  # 2026-05-31 and 31 May: one date in two notations
            if _sentence_around(text, text.find(a)) == _sentence_around(text, text.find(b)):
                continue  # an order inside one sentence ("from 3 to 5") is a role no value check sees
            marker = "\x00"
            swapped = text.replace(a, marker).replace(b, a).replace(marker, b)
            out.append(Mutation("swap", a, b, swapped))
    return out


def obligation_mutations(text: str, obligations: Iterable[str]) -> list[Mutation]:
    out = []
    for needle in dict.fromkeys(obligations):
        at = text.find(needle)
        if at < 0:
            continue
        s, e = _sentence_around(text, at)
        sentence = text[s:e]
        for pattern, repl in _POLARITY:
            m = pattern.search(sentence)
            if m:
                flipped = sentence[: m.start()] + repl + sentence[m.end() :]
                out.append(Mutation("polarity_flip", m.group(0), repl, text[:s] + flipped + text[e:]))
                break
        for a, b in _OUTCOMES:
            for old, new in ((a, b), (b, a)):
                if old in sentence and new not in sentence:
                    flipped = sentence.replace(old, new)
                    out.append(Mutation("decision_flip", old, new, text[:s] + flipped + text[e:]))
        out.append(Mutation("drop_obligation", sentence.strip(), "", text[:s] + text[e:]))
    return out


def mutate(text: str, targets: Sequence[str] = (), obligations: Sequence[str] = ()) -> list[Mutation]:
    """Every applicable mutation of ``text`` (deterministic, in a stable order)."""
    return [
        *value_mutations(text, targets),
        *swap_mutations(text, targets),
        *obligation_mutations(text, obligations),
    ]
