"""Decision latency, side by side in one run, at growing history sizes.

* ``memoryhub_engine``: ``triggers.engine.evaluate`` on running totals (pure arithmetic).
* ``memoryhub_decide``: the stateful service path an API call takes — one query for the workflow,
  its policy override and its newest summary's status (plus the tenant default when there is no
  override), evaluate, write the TriggerDecision row.
* ``langchain_approx``: LangChain SummarizationMiddleware's approach — ``count_tokens_approximately``
  over the whole message list before each model call.
* ``tiktoken_exact``: an exact recount of the whole history with the workflow's tiktoken encoding.

The workflow for each size is built through the real ingest service (``append_events``), so the
stateful path reads the same rows an agent platform would produce.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.db import connection

from memoryhub.actors import Actor
from memoryhub.bench.synthetic import synthetic_events
from memoryhub.events import append_events, parse_batch
from memoryhub.tenancy import create_tenant
from memoryhub.tokens import DEFAULT_ENCODING, get_encoding
from memoryhub.workflows import create_workflow
from triggers import services
from triggers.engine import DecisionInputs, PolicySpec, evaluate

DEFAULT_SIZES = (1_000, 10_000, 100_000)


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


def _build_workflow(tenant, external_id: str, contents: list[dict[str, Any]], log) -> Any:
    workflow, _ = create_workflow(tenant, external_id, actor=Actor.system("bench"))
    for lo in range(0, len(contents), 1_000):
        events, _ = parse_batch({"events": contents[lo : lo + 1_000]})
        append_events(workflow, events)
        if lo and lo % 20_000 == 0:
            log(f"    ingested {lo:,}/{len(contents):,}")
    workflow.refresh_from_db()
    return workflow


def _measure(tenant, size: int, *, decisions: int, baseline_repeats: int, log) -> dict[str, Any]:
    from langchain_core.messages import AIMessage
    from langchain_core.messages.utils import count_tokens_approximately

    encoding = get_encoding(DEFAULT_ENCODING)
    policy = PolicySpec()
    actor = Actor.system("bench")
    payload = synthetic_events(size, seed=size, prefix=f"t{size}")
    workflow = _build_workflow(tenant, f"trig-{size}", payload, log)
    messages = [AIMessage(content=e["content"]) for e in payload]
    texts = [e["content"] for e in payload]
    inputs = DecisionInputs(current_tokens=workflow.history_tokens, expected_next_step_tokens=2_000)
    trigger = policy.trigger_tokens

    def langchain_approx() -> bool:
        return count_tokens_approximately(messages) >= trigger

    def tiktoken_exact() -> bool:
        return sum(len(encoding.encode_ordinary(t)) for t in texts) + 2_000 > policy.safe_budget

    def engine() -> str:
        return evaluate(policy, inputs).action

    def decide() -> str:
        wf = services.workflow_for_decision(tenant, workflow.external_id)
        return services.decide(wf, {"expected_next_step_tokens": 2_000}, actor).action

    row: dict[str, Any] = {
        "messages": size,
        "history_tokens": workflow.history_tokens,
        "memoryhub_engine": _timed(engine, repeats=decisions * 10),
        "memoryhub_decide": _timed(decide, repeats=decisions),
        "langchain_approx": _timed(langchain_approx, repeats=baseline_repeats),
        "tiktoken_exact": _timed(tiktoken_exact, repeats=max(3, baseline_repeats // 4), budget_s=20.0),
    }
    decide_ms = row["memoryhub_decide"]["median_ms"]
    row["speedup_vs_langchain"] = round(row["langchain_approx"]["median_ms"] / decide_ms, 1)
    row["speedup_vs_tiktoken"] = round(row["tiktoken_exact"]["median_ms"] / decide_ms, 1)
    row["engine_speedup_vs_langchain"] = round(
        row["langchain_approx"]["median_ms"] / row["memoryhub_engine"]["median_ms"], 1
    )
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
    rows = []
    for size in sizes:
        log(f"  {size:,} messages: building the workflow through append_events")
        row = _measure(tenant, size, decisions=decisions, baseline_repeats=baseline_repeats, log=log)
        rows.append(row)
        log(
            f"    decide {row['memoryhub_decide']['median_ms']:.3f} ms · "
            f"engine {row['memoryhub_engine']['median_ms'] * 1000:.1f} µs · "
            f"langchain approx {row['langchain_approx']['median_ms']:.2f} ms · "
            f"tiktoken exact {row['tiktoken_exact']['median_ms']:.1f} ms "
            f"(×{row['speedup_vs_langchain']} / ×{row['speedup_vs_tiktoken']})"
        )
    first, last = rows[0], rows[-1]
    return {
        "database": connection.vendor,
        "sizes": list(sizes),
        "rows": rows,
        # Flat: the stateful decision at the largest size relative to the smallest.
        "decide_growth": round(
            last["memoryhub_decide"]["median_ms"] / first["memoryhub_decide"]["median_ms"], 2
        ),
        "langchain_growth": round(
            last["langchain_approx"]["median_ms"] / first["langchain_approx"]["median_ms"], 2
        ),
    }


def table(result: dict[str, Any]) -> str:
    """The side-by-side table for the closing note."""
    lines = [
        f"database: {result['database']}",
        f"{'messages':>9} {'tokens':>10} {'decide ms':>10} {'engine µs':>10} {'LC approx ms':>13} "
        f"{'tiktoken ms':>12} {'decide×LC':>10} {'decide×tik':>11} {'engine×LC':>10}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['messages']:>9,} {r['history_tokens']:>10,} {r['memoryhub_decide']['median_ms']:>10.3f} "
            f"{r['memoryhub_engine']['median_ms'] * 1000:>10.1f} {r['langchain_approx']['median_ms']:>13.2f} "
            f"{r['tiktoken_exact']['median_ms']:>12.1f} {r['speedup_vs_langchain']:>10} {r['speedup_vs_tiktoken']:>11} "
            f"{r['engine_speedup_vs_langchain']:>10}"
        )
    lines.append(
        f"decide latency growth {result['sizes'][0]:,} → {result['sizes'][-1]:,} messages: ×{result['decide_growth']} "
        f"(LangChain approx: ×{result['langchain_growth']})"
    )
    return "\n".join(lines)
