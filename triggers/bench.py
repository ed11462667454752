"""Decision latency, side by side in one run, at growing history sizes.

MemoryHub, three ways:

* ``memoryhub_engine``: ``triggers.engine.evaluate`` on running totals (pure arithmetic).
* ``memoryhub_decision``: the decision as the service makes it — one statement reads the
  workflow's running totals, the policy that applies and its newest summary's status, then the
  engine evaluates. This is what replaces a whole-history recount.
* ``memoryhub_logged``: the full stateful service call an API request makes — the decision plus
  its TriggerDecision row, which LangChain does not keep at all. Like the middleware's check
  (whose trigger never fires), the answer is "continue": the workflow's policy has a context
  window no history here reaches, so the row is buffered and written in batches
  (``triggers.decision_log``). Timed in blocks of ``MEMORYHUB_DECISION_BUFFER_ROWS`` calls, each
  including the batch write its last call makes (and a flush of anything left), divided by the
  calls: the per-call cost with its share of the writes.
* ``memoryhub_logged_compact``: the same call answering "compact" (a next step that takes the
  projection just over the safe budget), whose row is always committed synchronously: what a
  durable decision costs.

Against whole-history recounts before every model call:

* ``langchain_middleware``: LangChain's own ``SummarizationMiddleware.before_model`` with a
  trigger that does not fire — the per-step check it runs (message ids, then
  ``count_tokens_approximately`` over the whole list). Needs ``langchain`` >= 1.0.
* ``langchain_approx``: ``count_tokens_approximately`` over the whole message list alone.
* ``tiktoken_exact``: an exact recount of the whole history with the workflow's tiktoken encoding.

MemoryHub's paths are timed as blocks of calls (a sample is the block's time ÷ its calls) and
LangChain's as single calls, interleaved round by round; medians over the rounds.

The workflow for each size is built through the real ingest service (``append_events``), so the
stateful path reads the same rows an agent platform would produce.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.bench.synthetic import synthetic_events
from memoryhub.core.actors import Actor
from memoryhub.core.tokens import DEFAULT_ENCODING, get_encoding
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Tenant, Workflow
from triggers import services
from triggers.decision_log import flush_decision_buffer
from triggers.engine import DecisionInputs, PolicySpec, evaluate
from triggers.policy import policy_for

DEFAULT_SIZES = (1_000, 10_000, 100_000)

# Each benchmark workflow's policy: a window no history here reaches (like the middleware's
# trigger that never fires), so an ordinary next step answers "continue".
CONTINUE_POLICY = {"context_window": 2_000_000_000, "target_tokens": 8_000}


def _interleaved(
    fns: dict[str, tuple[Callable[[], Any] | None, int]], *, rounds: int, budget_s: float = 30.0
) -> dict[str, Any]:
    """Run competing paths round-robin, in an order that rotates, so a noisy neighbour slows all
    of them alike. Each path is ``(block, calls)``: every round times one ``block()``, which makes
    ``calls`` calls, and records its time ÷ ``calls``. Median and p95 per call in milliseconds
    (None for a path that is not available)."""
    live = [(name, fn, calls) for name, (fn, calls) in fns.items() if fn is not None]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in live}
    spent = 0.0
    for index in range(rounds):
        shift = index % len(live)
        for name, fn, calls in live[shift:] + live[:shift]:
            started = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - started
            samples[name].append(elapsed * 1000 / calls)
            spent += elapsed
        if spent > budget_s and index >= 2:
            break
    out: dict[str, Any] = {name: None for name in fns}
    for name, values in samples.items():
        ordered = sorted(values)
        out[name] = {
            "median_ms": round(statistics.median(ordered), 4),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 4),
            "runs": len(ordered),
        }
    return out


def _block(fn: Callable[[], Any], calls: int, then: Callable[[], Any] | None = None) -> Callable[[], None]:
    """``calls`` calls of ``fn`` (then ``then()``) as one timed block."""

    def run() -> None:
        for _ in range(calls):
            fn()
        if then is not None:
            then()

    return run


def _timed(fn: Callable[[], Any], *, repeats: int, budget_s: float = 5.0) -> dict[str, float]:
    """Median and p95 of ``fn`` in milliseconds (stops early once ``budget_s`` is spent)."""
    samples: list[float] = []
    spent = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - started
        samples.append(elapsed * 1000)
        spent += elapsed
        if spent > budget_s and len(samples) >= 3:
            break
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered), 4),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 4),
        "runs": len(ordered),
    }


def _build_workflow(
    tenant: Tenant, external_id: str, contents: list[dict[str, Any]], log: Callable[[str], None]
) -> Workflow:
    workflow, _ = create_workflow(tenant, external_id, actor=Actor.system("bench"))
    for lo in range(0, len(contents), 1_000):
        events, _ = parse_batch({"events": contents[lo : lo + 1_000]})
        append_events(workflow, events)
        if lo and lo % 20_000 == 0:
            log(f"    ingested {lo:,}/{len(contents):,}")
    services.save_policy(tenant, CONTINUE_POLICY, Actor.system("bench"), workflow=workflow, partial=True)
    workflow.refresh_from_db()
    return workflow


def _langchain_middleware_check(messages: list[Any]) -> Callable[[], Any] | None:
    """LangChain's per-step check, or None when ``langchain`` (v1 middleware) is not installed."""
    try:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
    except ImportError:
        return None
    # A trigger that never fires: we time the check that runs before every model call, not a summary.
    middleware = SummarizationMiddleware(model=FakeListChatModel(responses=["-"]), trigger=("tokens", 10**12))
    state = {"messages": messages}
    middleware.before_model(state, None)  # type: ignore[arg-type]  # assigns message ids once, as a graph would
    return lambda: middleware.before_model(state, None)  # type: ignore[arg-type]  # as above


def _speedup(baseline: dict[str, float] | None, ours: dict[str, float]) -> float | None:
    return round(baseline["median_ms"] / ours["median_ms"], 1) if baseline else None


def _settle() -> None:
    """Let PostgreSQL catch up after the bulk ingest (outside a transaction only), so autovacuum
    of the fresh rows does not land in the middle of one size's timings."""
    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memoryhub_event, memoryhub_workflow, triggers_triggerdecision")


def _measure(
    tenant: Tenant,
    workflow: Workflow,
    payload: list[dict[str, Any]],
    *,
    decisions: int,
    baseline_repeats: int,
) -> dict[str, Any]:
    # langchain-core, an optional extra: run() has checked that it is installed.
    from langchain_core.messages import AIMessage
    from langchain_core.messages.utils import count_tokens_approximately

    size = len(payload)
    encoding = get_encoding(DEFAULT_ENCODING)
    policy = PolicySpec()
    actor = Actor.system("bench")
    messages = [AIMessage(content=e["content"]) for e in payload]
    texts = [e["content"] for e in payload]
    inputs = DecisionInputs(current_tokens=workflow.history_tokens, expected_next_step_tokens=2_000)
    trigger = policy.trigger_tokens
    step = {"expected_next_step_tokens": 2_000}

    def langchain_approx() -> bool:
        return count_tokens_approximately(messages) >= trigger

    def tiktoken_exact() -> bool:
        return sum(len(encoding.encode_ordinary(t)) for t in texts) + 2_000 > policy.safe_budget

    def engine() -> str:
        return evaluate(policy, inputs).action

    def decision() -> str:
        wf = services.workflow_for_decision(tenant, workflow.external_id)
        return services.evaluate_for(wf, step)[0].action

    # A next step that takes the projection just over the safe budget: "compact".
    spec = policy_for(workflow)
    big_step = {"expected_next_step_tokens": spec.safe_budget - workflow.history_tokens + 1}

    def logged() -> str:
        wf = services.workflow_for_decision(tenant, workflow.external_id)
        return services.decide(wf, step, actor).action

    def logged_compact() -> str:
        wf = services.workflow_for_decision(tenant, workflow.external_id)
        return services.decide(wf, big_step, actor).action

    assert logged() == "continue" and logged_compact() == "compact", "bench policy must give both answers"
    flush_decision_buffer()  # every timed block starts with an empty buffer
    middleware_check = _langchain_middleware_check(messages)
    # MemoryHub's paths are ~100× cheaper: each round times a block of ``per_round`` calls of
    # them and one call of each LangChain path, all interleaved, so every path sees the same
    # machine load and every sample spans many calls (stalls included, as in LangChain's long
    # ones). A logged block fills the buffer exactly once: its last call writes the batch.
    per_round = max(1, decisions // max(1, baseline_repeats))
    rows_per_batch = max(1, settings.MEMORYHUB_DECISION_BUFFER_ROWS)
    timed = _interleaved(
        {
            "memoryhub_decision": (_block(decision, per_round), per_round),
            "memoryhub_logged": (_block(logged, rows_per_batch, flush_decision_buffer), rows_per_batch),
            "memoryhub_logged_compact": (_block(logged_compact, per_round), per_round),
            "langchain_middleware": (middleware_check, 1),
            "langchain_approx": (langchain_approx, 1),
        },
        rounds=baseline_repeats,
    )
    row: dict[str, Any] = {
        "messages": size,
        "history_tokens": workflow.history_tokens,
        "memoryhub_engine": _timed(engine, repeats=decisions * 10),
        **timed,
        "tiktoken_exact": _timed(tiktoken_exact, repeats=max(3, baseline_repeats // 4), budget_s=20.0),
    }
    for ours in ("engine", "decision", "logged", "logged_compact"):
        mine = row[f"memoryhub_{ours}"]
        row[f"{ours}_speedup_vs_middleware"] = _speedup(row["langchain_middleware"], mine)
        row[f"{ours}_speedup_vs_langchain"] = _speedup(row["langchain_approx"], mine)
        row[f"{ours}_speedup_vs_tiktoken"] = _speedup(row["tiktoken_exact"], mine)
    return row


def run(
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    *,
    decisions: int = 200,
    baseline_repeats: int = 20,
    tenant_slug: str | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure all four approaches at each size; returns rows plus speed-up and flatness figures."""
    try:
        import langchain_core.messages.utils  # noqa: F401
    except ImportError as exc:  # pragma: no cover - langchain-core comes with the langgraph extra
        raise RuntimeError(
            "the trigger benchmark needs langchain-core (pip install -e '.[langgraph]')"
        ) from exc

    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(tenant_slug or f"bench-triggers-{stamp}", "Trigger benchmark")
    # Build every size first, then time them one after the other under the same conditions.
    built = []
    for size in sizes:
        log(f"  {size:,} messages: building the workflow through append_events")
        payload = synthetic_events(size, seed=size, prefix=f"t{size}")
        built.append((_build_workflow(tenant, f"trig-{size}", payload, log), payload))
    _settle()
    rows = []
    for workflow, payload in built:
        row = _measure(tenant, workflow, payload, decisions=decisions, baseline_repeats=baseline_repeats)
        rows.append(row)
        log(f"  {len(payload):,} messages: " + _row_line(row))
    first, last = rows[0], rows[-1]

    def growth(key: str) -> float | None:
        if not (first[key] and last[key]):
            return None
        return round(last[key]["median_ms"] / first[key]["median_ms"], 2)

    result = {
        "database": connection.vendor,
        "buffer_rows": settings.MEMORYHUB_DECISION_BUFFER_ROWS,
        "sizes": list(sizes),
        "rows": rows,
        # Flat: each approach's latency at the largest size relative to the smallest.
        "growth": {
            key: growth(key)
            for key in (
                "memoryhub_engine",
                "memoryhub_decision",
                "memoryhub_logged",
                "memoryhub_logged_compact",
                "langchain_middleware",
                "langchain_approx",
                "tiktoken_exact",
            )
        },
    }
    log(table(result))
    return result


def _ms(timing: dict[str, float] | None) -> str:
    return f"{timing['median_ms']:.3f}" if timing else "n/a"


def _row_line(r: dict[str, Any]) -> str:
    return (
        f"engine {r['memoryhub_engine']['median_ms'] * 1000:.1f} µs · decision {_ms(r['memoryhub_decision'])} ms · "
        f"logged {_ms(r['memoryhub_logged'])} ms · logged compact {_ms(r['memoryhub_logged_compact'])} ms | LangChain middleware {_ms(r['langchain_middleware'])} ms · "
        f"approx {_ms(r['langchain_approx'])} ms · tiktoken {_ms(r['tiktoken_exact'])} ms | "
        f"logged ×{r['logged_speedup_vs_middleware']} · compact ×{r['logged_compact_speedup_vs_middleware']} "
        "vs the middleware"
    )


def table(result: dict[str, Any]) -> str:
    """The side-by-side table for the closing note: medians in ms, then speed-ups (baseline ÷ ours)."""
    header = (
        f"{'messages':>9} {'tokens':>10} {'engine':>8} {'decision':>9} {'logged':>8} {'lg compact':>10} "
        f"{'LC mw':>8} {'LC approx':>10} {'tiktoken':>9}  "
        f"{'decision×mw':>11} {'logged×mw':>9} {'compact×mw':>10} {'logged×LC':>9} {'logged×tik':>10}"
    )
    lines = [
        f"database: {result['database']} (medians in ms per call; ×: baseline ÷ MemoryHub; MemoryHub "
        f"timed in blocks of calls, logged in blocks of {result['buffer_rows']} with their batch write)",
        header,
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['messages']:>9,} {r['history_tokens']:>10,} {r['memoryhub_engine']['median_ms']:>8.4f} "
            f"{_ms(r['memoryhub_decision']):>9} {_ms(r['memoryhub_logged']):>8} "
            f"{_ms(r['memoryhub_logged_compact']):>10} "
            f"{_ms(r['langchain_middleware']):>8} {_ms(r['langchain_approx']):>10} {_ms(r['tiktoken_exact']):>9}  "
            f"{r['decision_speedup_vs_middleware'] or 'n/a':>11} {r['logged_speedup_vs_middleware'] or 'n/a':>9} "
            f"{r['logged_compact_speedup_vs_middleware'] or 'n/a':>10} {r['logged_speedup_vs_langchain']:>9} "
            f"{r['logged_speedup_vs_tiktoken']:>10}"
        )
    growth = result["growth"]
    lines.append(
        f"growth {result['sizes'][0]:,} → {result['sizes'][-1]:,} messages: "
        + " · ".join(f"{key} ×{value}" for key, value in growth.items() if value is not None)
    )
    return "\n".join(lines)
