"""A labelled corpus for ``bench quality``: text of many genres with its must-keep items written down
by the generator at the moment it plants them (never found afterwards by an extractor).

Genres: support chat, pytest logs, git diffs, JSON API responses, Python stack traces, requirements
in English, German and Japanese, and tables. Each planted item is a ``Label``:

* ``unit``: an identifier, amount, date, number with unit, path:line… exactly as written;
* ``obligation``: a sentence carrying a requirement/constraint/decision, with its cue words (the
  polarity: "must not", "darf nicht", "禁止"…) and the units it holds.

Mutation targets come from the generator too: each unit label knows its ``role`` (id, amount, date,
number) and decision labels carry their flipped wording, so a mutant changes a value the
generator knows is there.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from memoryhub.compaction.types import SourceEvent

GENRES = ("chat", "tool_log", "diff", "json_api", "stack_trace", "req_en", "req_de", "req_ja", "table")


@dataclass(frozen=True)
class Label:
    seq: int
    kind: str  # "unit" | "obligation"
    text: str  # the unit, or the obligation sentence
    genre: str
    role: str = ""  # unit: id | amount | date | number; obligation: rule | decision
    units: tuple[str, ...] = ()  # an obligation's units
    cue: str = ""  # an obligation's cue words, as written
    flipped: str = ""  # a decision's sentence with the decision reversed


@dataclass
class LabelledWorkflow:
    name: str
    events: list[SourceEvent] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)


class _Writer:
    """Appends events and records labels for the seq being written."""

    def __init__(self, wf: LabelledWorkflow, rng: random.Random) -> None:
        self.wf, self.rng = wf, rng

    @property
    def seq(self) -> int:
        return len(self.wf.events) + 1

    def unit(self, genre: str, value: str, role: str) -> str:
        self.wf.labels.append(Label(self.seq, "unit", value, genre, role, (value,)))
        return value

    def rule(self, genre: str, sentence: str, cue: str, units: tuple[str, ...], flipped: str = "") -> str:
        role = "decision" if flipped else "rule"
        self.wf.labels.append(Label(self.seq, "obligation", sentence, genre, role, units, cue, flipped))
        return sentence

    def add(self, kind: str, content: str, agent: str, **extra) -> None:
        self.wf.events.append(
            SourceEvent(seq=self.seq, kind=kind, content=content, agent=agent, role="assistant", **extra)
        )


def _code(rng: random.Random, n: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


_NAMES = ("Schäfer", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Haddad", "Brennan")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")
_MONATE = ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober")
_WORDS = ("ledger", "refund", "invoice", "payout", "webhook", "account", "session", "export", "quota")


def _chat(w: _Writer) -> None:
    rng = w.rng
    order = w.unit("chat", f"{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}-{rng.randint(10, 99)}", "id")
    total = w.unit("chat", f"${rng.randint(20, 999)}.{rng.randint(0, 99):02d}", "amount")
    tracking = w.unit("chat", "1Z" + _code(rng, 16), "id")
    w.add("message", f"Customer: my order {order} arrived with a cracked leg, I paid {total} and the tracking "
          f"number was {tracking}. Can you help?", "support-bot")  # fmt: skip
    # Labels belong to the event being written: the part and date are in the agent's reply.
    part = w.unit("chat", f"{_code(rng, 3, string.ascii_uppercase)}-ALU-{rng.randint(10, 99)}", "id")
    date = w.unit("chat", f"{_MONTHS[rng.randrange(10)]} {rng.randint(2, 27)}", "date")
    w.add("message", f"Agent: I'm sorry about that. The replacement leg is part {part}; it can ship on {date} "
          "if that works for you.", "support-agent")  # fmt: skip
    rule = w.rule(
        "chat",
        f"We will send a replacement for order {order}, not a refund.",
        "send a replacement",
        (order,),
        flipped=f"We will issue a refund for order {order}, not a replacement.",
    )
    w.add("decision", f"Agent: {rule} Thanks for your patience.", "support-agent")


def _tool_log(w: _Writer) -> None:
    rng = w.rng
    word = rng.choice(_WORDS)
    test = w.unit("tool_log", f"tests/test_{word}s.py::test_partial_{word}_{rng.randint(1, 99)}", "id")
    where = w.unit("tool_log", f"{word}s.py:{rng.randint(20, 400)}", "id")
    got, want = rng.randint(100, 999), rng.randint(1000, 9999)
    took = w.unit("tool_log", f"{rng.randint(1, 59)}.{rng.randint(10, 99)}s", "number")
    passed = rng.randint(20, 300)
    w.add(
        "tool_result",
        "============================= test session starts ==============================\n"
        f"collected {passed + 1} items\n\n"
        f"{test} FAILED\n\n"
        "=================================== FAILURES ===================================\n"
        f"    assert refund.amount == {want}\nE   AssertionError: assert {got} == {want}\n\n"
        f"{where}: AssertionError\n"
        f"=========================== 1 failed, {passed} passed in {took} ===========================",
        "tester",
    )


def _diff(w: _Writer) -> None:
    rng = w.rng
    sha = w.unit("diff", _code(rng, 40, "0123456789abcdef"), "id")
    word = rng.choice(_WORDS)
    path = f"src/payments/{word}.py"
    old, new = rng.randint(5, 30), rng.randint(31, 90)
    const = w.unit("diff", f"{word.upper()}_TIMEOUT_SECONDS", "id")
    w.unit("diff", str(new), "number")
    w.add(
        "tool_result",
        f"commit {sha}\nAuthor: {rng.choice(_NAMES)} <dev@example.com>\n\n    raise the {word} timeout\n\n"
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -12,7 +12,7 @@\n"
        f"-{const} = {old}\n+{const} = {new}\n",
        "coder",
    )


def _json_api(w: _Writer) -> None:
    rng = w.rng
    pi = w.unit("json_api", "pi_" + _code(rng, 24, string.ascii_letters + string.digits), "id")
    cents = rng.randint(1000, 99999)
    w.unit("json_api", str(cents), "amount")
    customer = w.unit("json_api", "cus_" + _code(rng, 14, string.ascii_letters + string.digits), "id")
    created = rng.randint(1_700_000_000, 1_800_000_000)
    w.unit("json_api", str(created), "date")
    w.add(
        "tool_result",
        '{\n  "id": "' + pi + '",\n  "object": "payment_intent",\n  "amount": ' + str(cents) + ',\n'
        '  "currency": "eur",\n  "customer": "' + customer + '",\n  "created": ' + str(created) + ',\n'
        '  "status": "requires_capture",\n  "livemode": false\n}',
        "api-client",
    )  # fmt: skip


def _stack_trace(w: _Writer) -> None:
    rng = w.rng
    word = rng.choice(_WORDS)
    line = "line " + w.unit("stack_trace", str(rng.randint(10, 900)), "number")
    request = w.unit("stack_trace", "req_" + _code(rng, 12, string.ascii_lowercase), "id")
    err = w.unit("stack_trace", f"{word.capitalize()}GatewayTimeout", "id")
    w.add(
        "tool_result",
        "Traceback (most recent call last):\n"
        f'  File "/srv/app/{word}/views.py", line 44, in post\n    return service.capture(payload)\n'
        f'  File "/srv/app/{word}/service.py", {line}, in capture\n    raise {err}(request_id)\n'
        f"{err}: upstream did not answer (request {request})",
        "tester",
    )


def _req_en(w: _Writer) -> None:
    rng = w.rng
    code = str(rng.choice((400, 401, 403, 409, 422, 429)))
    limit = f"{rng.randint(2, 60)} seconds"
    retries = f"{rng.randint(2, 9)} retries"
    endpoint = f"/v1/{rng.choice(_WORDS)}s"
    rule = w.rule("req_en", f"POST {endpoint} must return {code} when the token is missing.", "must return",
                  (endpoint, code))  # fmt: skip
    rule2 = w.rule("req_en", f"The client must never wait longer than {limit} and at most {retries} are allowed.",
                   "must never", (limit, retries))  # fmt: skip
    w.add("requirement", f"{rule} {rule2}", "requirements-agent")


def _req_de(w: _Writer) -> None:
    rng = w.rng
    amount = f"{rng.randint(2, 99)}.{rng.randint(100, 999)} EUR"
    minutes = f"{rng.randint(5, 90)} Minuten"
    date = f"{rng.randint(1, 28)}. {rng.choice(_MONATE)}"
    name = rng.choice(_NAMES)
    rule = w.rule("req_de", f"Rechnungen über {amount} müssen bis zum {date} von Frau {name} freigegeben werden.",
                  "müssen", (amount, date, name))  # fmt: skip
    rule2 = w.rule("req_de", f"Der Export darf nicht länger als {minutes} dauern.", "darf nicht", (minutes,))
    w.add("requirement", f"{rule} {rule2}", "requirements-agent")


def _req_ja(w: _Writer) -> None:
    rng = w.rng
    code = str(rng.choice((401, 403, 429)))
    secs = f"{rng.randint(5, 60)}秒"
    times = f"{rng.randint(2, 9)}回"
    rule = w.rule(
        "req_ja", f"トークンがない場合は{code}を返さなければならない。", "なければならない", (code,)
    )
    rule2 = w.rule(
        "req_ja", f"タイムアウトは{secs}以内とし、再試行は{times}までとすること。", "こと", (secs, times)
    )
    w.add("requirement", f"{rule}{rule2}", "requirements-agent")


def _table(w: _Writer) -> None:
    rng = w.rng
    rows = []
    for _ in range(3):
        sku = w.unit("table", f"SKU-{rng.randint(10000, 99999)}", "id")
        price = w.unit("table", f"{rng.randint(1, 499)}.{rng.randint(0, 99):02d}", "amount")
        rows.append(f"| {sku} | {rng.choice(_WORDS)} | {rng.randint(1, 40)} | {price} |")
    w.add(
        "tool_result", "| sku | item | qty | unit price |\n|---|---|---|---|\n" + "\n".join(rows), "analyst"
    )


_GENRE_WRITERS: dict[str, Callable[[_Writer], None]] = {
    "chat": _chat,
    "tool_log": _tool_log,
    "diff": _diff,
    "json_api": _json_api,
    "stack_trace": _stack_trace,
    "req_en": _req_en,
    "req_de": _req_de,
    "req_ja": _req_ja,
    "table": _table,
}

# Agent chatter: whole sentences, some with the "I will…" an agent writes about its own next step.
_PROSE = (
    "I went through the earlier notes and the plan still holds.",
    "I will keep going with the same approach and check back once the next batch of results is in.",
    "Nothing in this step changes the outcome.",
    "It mostly confirms what the team already expected from the previous round of work.",
    "The remaining questions are about ordering rather than substance.",
    "The notes stay short so the next reader can follow along without reading every message.",
    "Let me look at the output of the last run before touching anything else.",
    "That matches what the reviewer said yesterday, so there is no reason to change course.",
    "Next I will re-run the suite and compare the numbers with the previous attempt.",
    "The logs are noisy but the relevant part is small and easy to spot.",
    "I am summarising here so the thread stays readable for whoever picks this up.",
    "The earlier draft covered most of this already; only the wording changed.",
)


def _prose(rng: random.Random) -> str:
    return " ".join(rng.choice(_PROSE) for _ in range(rng.randint(4, 9)))


def generate(index: int, n_events: int, seed: int = 28) -> LabelledWorkflow:
    """A deterministic workflow of about ``n_events`` events: genres interleaved with plain prose."""
    rng = random.Random(f"{seed}:{index}")
    wf = LabelledWorkflow(name=f"lab-{index:04d}")
    w = _Writer(wf, rng)
    genres = list(GENRES)
    rng.shuffle(genres)
    turn = 0
    while len(wf.events) < n_events:
        if rng.random() < 0.4:
            _GENRE_WRITERS[genres[turn % len(genres)]](w)
            turn += 1
        else:
            w.add("message", _prose(rng), rng.choice(("planner", "coder", "reviewer")))
    return wf
