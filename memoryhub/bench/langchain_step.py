"""The LangChain middleware's cost per model call, beside LangChain's own ``SummarizationMiddleware``.

``manage.py bench langchain`` (``--lc-sizes 1000,10000,100000``, ``--lc-calls 30``). For each history
size both middlewares get the same history and then the same new messages per model call
(an AI answer, a tool call and its result every few calls, the next user message), with the same
``trigger``/``keep`` (a trigger that does not fire: the per-call check is what is timed). Measured in
this process, against a real gunicorn server on a loopback port:

* ``langchain_ms``: ``SummarizationMiddleware.before_model`` (LangChain counts the whole history);
* ``agent_ms``: what our middleware costs the agent per model call — ``before_model`` plus the
  trace bookkeeping of ``wrap_model_call``; its step request is queued for the background drainer;
* ``synced_ms``: the same call followed by waiting until the server has stored that step
  (``flush``): client → HTTP → step endpoint → database, one round trip, as if the agent waited.

The history is loaded into MemoryHub first (the middleware's own catch-up, in chunks of the
server's batch maximum) and not timed. Medians over the calls; after each size the server's
event and trace counts are checked against what was sent (nothing lost, nothing doubled).

``repair`` (issue #32): the cost of the repair step on a compaction turn. The same conversation
(``memoryhub.examples.repair_scenario``: the summarizer drops a requirement, a constraint and two
identifiers) is compacted ``repair_rounds`` times with ``repair=False`` (LangChain's behaviour:
the step is queued, the agent does not wait) and with repair on (``POST …/repair/`` is answered
and the hand-back appended; the step that records the compaction is queued as before). ``overhead_p50_ms`` = median with repair − median without;
``round_trips`` = requests the agent waited for on that turn (with repair: 1; without: 0); each
repaired summary is checked to hold all four things again.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.models import ConsumerTrace, Event

TRIGGER = ("tokens", 10**12)  # never fires: both pay only their per-call check
KEEP = ("messages", 20)


def _history(n: int) -> list[Any]:
    """A support chat of ``n`` messages: user, assistant, every fifth turn a tool call + result."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    messages: list[Any] = []
    i = 0
    while len(messages) < n:
        messages.append(
            HumanMessage(
                f"Order A{i:06d}: the customer says parcel {i % 7} never arrived; refund {i % 90} EUR?",
                id=f"h{i}",
            )
        )
        if i % 5 == 4 and len(messages) + 3 <= n:
            call = {"name": "lookup_order", "args": {"order": f"A{i:06d}"}, "id": f"call-{i}"}
            messages.append(AIMessage("", tool_calls=[call], id=f"t{i}"))
            messages.append(
                ToolMessage(
                    f'{{"order": "A{i:06d}", "status": "in transit", "carrier": "ACME", "scans": {i % 11}}}',
                    tool_call_id=f"call-{i}",
                    id=f"r{i}",
                )  # fmt: skip
            )
        if len(messages) < n:
            messages.append(
                AIMessage(
                    f"Checked A{i:06d}: scanned {i % 11} times; refund of {i % 90} EUR is due.", id=f"a{i}"
                )
            )
        i += 1
    return messages[:n]


def _turn(k: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [
        AIMessage(f"Answer {k}: the refund is approved and the ticket is closed.", id=f"bench-a{k}"),
        HumanMessage(f"Next: order B{k:05d} shows a duplicate charge of {k % 40} EUR.", id=f"bench-h{k}"),
    ]


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def _scenario() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    from memoryhub.examples.repair_scenario import TURNS

    messages: list[Any] = []
    for i, (role, text) in enumerate(TURNS):
        cls = HumanMessage if role == "user" else AIMessage
        messages.append(cls(text, id=f"rep-{i}"))
    messages.append(HumanMessage("What should I do first?", id="rep-last"))
    return messages


def repair_overhead(base: str, secret: str, spool: str, stamp: str, rounds: int = 20) -> dict[str, Any]:
    """The repair step's cost on a compaction turn (see the module doc)."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from memoryhub.client.resilience import HubConfig, ResilientHub
    from memoryhub.examples.repair_scenario import LOSSY_SUMMARY, MUST_RETURN
    from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware

    times: dict[bool, list[float]] = {False: [], True: []}
    trips: dict[bool, list[int]] = {False: [], True: []}
    for k in range(rounds):
        for repair in (False, True):
            messages = _scenario()
            hub = ResilientHub(
                HubConfig(
                    url=base, api_key=secret, spool_dir=Path(spool, f"repair-{k}-{repair}"), deadline=30.0
                ),
                component="bench",
            )
            middleware = MemoryHubSummarizationMiddleware(
                FakeListChatModel(responses=[LOSSY_SUMMARY]),
                hub=hub,
                workflow_id=f"bench-repair-{stamp}-{k}-{int(repair)}",
                trigger=("messages", len(messages)),
                keep=("messages", 2),
                repair=repair,
            )
            middleware.before_model({"messages": messages[:-1]}, None)  # the history, not timed
            if not hub.flush(timeout=60):
                raise RuntimeError(f"repair bench: history not delivered: {hub.status()}")
            waited = 0

            def counting(method: Any) -> Any:
                def counted(*args: Any, **kwargs: Any) -> Any:
                    nonlocal waited
                    waited += 1
                    return method(*args, **kwargs)

                return counted

            # Count the requests the agent waits for (the background drainer has its own client).
            hub.client.step = counting(hub.client.step)  # type: ignore[method-assign]
            hub.client.repair_verdict = counting(hub.client.repair_verdict)  # type: ignore[method-assign]
            started = time.perf_counter()
            update = middleware.before_model({"messages": messages}, None)
            times[repair].append(time.perf_counter() - started)
            trips[repair].append(waited)
            if update is None:
                raise RuntimeError("repair bench: the trigger did not fire")
            summary = str(update["messages"][1].content)
            if repair and not all(value in summary for value in MUST_RETURN):
                raise RuntimeError(f"repair bench: not repaired: {summary!r} ({middleware.last_repair})")
            hub.flush(timeout=60)
            hub.close()
    off, on = _median_ms(times[False]), _median_ms(times[True])
    return {
        "rounds": rounds,
        "without_repair_p50_ms": off,
        "with_repair_p50_ms": on,
        "overhead_p50_ms": round(on - off, 3),
        "with_repair_p90_ms": round(sorted(times[True])[int(0.9 * (rounds - 1))] * 1000, 3),
        "round_trips": max(trips[True]),
        "round_trips_without": max(trips[False]),
        "restored": "requirement, constraint and both identifiers in every repaired summary",
    }


def run(
    sizes: list[int] | None = None, calls: int = 30, log=print, repair_rounds: int = 20
) -> dict[str, Any]:
    # The memoryhub[langchain] extra: imported when this benchmark runs.
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from memoryhub.client.resilience import HubConfig, ResilientHub
    from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware

    sizes = sizes or [1_000, 10_000, 100_000]
    stamp = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    tenant = create_tenant(f"bench-lc-{stamp}", "LangChain middleware benchmark")
    secret = issue_api_key(tenant, "bench").secret
    summarizer = FakeListChatModel(responses=["summary"])
    results: dict[str, Any] = {"calls_per_size": calls}
    with running_server(workers=2) as base, tempfile.TemporaryDirectory() as spool:
        for n in sizes:
            history = _history(n)
            native = SummarizationMiddleware(summarizer, trigger=TRIGGER, keep=KEEP)
            state = list(history)
            native_times = []
            for k in range(calls):
                state.extend(_turn(k))
                started = time.perf_counter()
                native.before_model({"messages": state}, None)  # type: ignore[arg-type]
                native_times.append(time.perf_counter() - started)

            workflow = f"bench-lc-{n}"
            hub = ResilientHub(
                HubConfig(url=base, api_key=secret, spool_dir=Path(spool, str(n)), deadline=30.0),
                component="bench",
            )
            ours = MemoryHubSummarizationMiddleware(
                summarizer, hub=hub, workflow_id=workflow, trigger=TRIGGER, keep=KEEP
            )
            state = list(history)
            started = time.perf_counter()
            ours.before_model({"messages": state}, None)
            if not hub.flush(timeout=1800):
                raise RuntimeError(f"catch-up of {n} messages not delivered: {hub.status()}")
            catch_up = time.perf_counter() - started
            agent_times, synced_times = [], []
            for k in range(calls):
                state.extend(_turn(k))
                started = time.perf_counter()
                ours.before_model({"messages": state}, None)
                ours._trace(SimpleNamespace(messages=state))  # what wrap_model_call adds
                agent_times.append(time.perf_counter() - started)
                if not hub.flush(timeout=60):
                    raise RuntimeError(f"step not delivered: {hub.status()}")
                synced_times.append(time.perf_counter() - started)
            ours.after_agent({"messages": state}, None)
            hub.flush(timeout=60)
            stored = Event.objects.filter(workflow__tenant=tenant, workflow__external_id=workflow).count()
            traced = ConsumerTrace.objects.filter(
                workflow__tenant=tenant, workflow__external_id=workflow
            ).count()
            status = hub.status()
            hub.close()
            expected_events = sum(
                len(m.tool_calls) if getattr(m, "tool_calls", None) and not m.content else 1 for m in state
            )
            if stored != expected_events or traced != calls or status["rejected"] or status["spooled"]:
                raise RuntimeError(
                    f"{n}: stored {stored}/{expected_events} events, {traced}/{calls} traces, {status}"
                )
            row = {
                "langchain_ms": _median_ms(native_times),
                "agent_ms": _median_ms(agent_times),
                "synced_ms": _median_ms(synced_times),
                "catch_up_s": round(catch_up, 2),
            }
            row["agent_speedup"] = round(row["langchain_ms"] / row["agent_ms"], 1)
            row["synced_speedup"] = round(row["langchain_ms"] / row["synced_ms"], 2)
            results[f"{n}"] = row
            log(
                f"langchain: {n:>7,} messages  LangChain {row['langchain_ms']:8.3f} ms   ours (agent) "
                f"{row['agent_ms']:7.3f} ms = {row['agent_speedup']:6.1f}x   ours (synced, HTTP) "
                f"{row['synced_ms']:7.3f} ms = {row['synced_speedup']:5.2f}x   catch-up {row['catch_up_s']} s"
            )
        if repair_rounds:
            repair = results["repair"] = repair_overhead(base, secret, spool, stamp, repair_rounds)
            log(
                f"langchain repair (compaction turn, {repair_rounds} rounds): without "
                f"{repair['without_repair_p50_ms']:.3f} ms, with {repair['with_repair_p50_ms']:.3f} ms p50 "
                f"(p90 {repair['with_repair_p90_ms']:.3f} ms) = +{repair['overhead_p50_ms']:.3f} ms, "
                f"{repair['round_trips']} round trip(s) waited (without: {repair['round_trips_without']})"
            )
    first, last = str(sizes[0]), str(sizes[-1])
    results["agent_growth"] = round(results[last]["agent_ms"] / results[first]["agent_ms"], 2)
    results["synced_growth"] = round(results[last]["synced_ms"] / results[first]["synced_ms"], 2)
    results["langchain_growth"] = round(results[last]["langchain_ms"] / results[first]["langchain_ms"], 2)
    return results
