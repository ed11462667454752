"""Benchmark (timing thresholds live only here). A trigger decision reads running totals, so it
does not slow down as history grows, while whole-history recounts (LangChain's
count_tokens_approximately before every model call, or an exact tiktoken recount) grow linearly.

Two MemoryHub figures are measured: the decision itself (``engine``: arithmetic on the totals, what
replaces the recount) and the whole stateful service call (``decide``: workflow lookup, policy,
newest summary status, the logged TriggerDecision row). The full 1k/10k/100k table is
``manage.py bench_triggers``.
"""

from __future__ import annotations

import pytest

from triggers import bench

pytestmark = [pytest.mark.bench, pytest.mark.django_db]


def test_decision_latency_is_flat_and_beats_whole_history_recounts():
    result = bench.run((1_000, 10_000), decisions=60, baseline_repeats=8, log=lambda _msg: None)
    report = bench.table(result)
    print("\n" + report)
    small, large = result["rows"]
    assert large["history_tokens"] > 5 * small["history_tokens"]
    # The decision: ≥ 10× faster than LangChain's approximate recount at 10k messages.
    assert large["engine_speedup_vs_langchain"] >= 10, report
    # The logged service call (with its database reads and write) beats an exact recount ≥ 10×.
    assert large["speedup_vs_tiktoken"] >= 10, report
    # Flat: 10× more history must not make the decision meaningfully slower (recounts grow ~10×).
    assert result["decide_growth"] <= 3, report
    engine_growth = large["memoryhub_engine"]["median_ms"] / small["memoryhub_engine"]["median_ms"]
    assert engine_growth <= 3, report
