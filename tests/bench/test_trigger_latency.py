"""Benchmark (timing thresholds live only here). A trigger decision reads running totals, so it
does not slow down as history grows, while whole-history recounts (LangChain's
count_tokens_approximately before every model call, or an exact tiktoken recount) grow linearly.

Three MemoryHub figures are measured: the engine (arithmetic on the totals), the decision as the
service makes it (one statement for totals + policy + newest summary status, then the engine: what
replaces the recount) and the logged call (the decision plus its TriggerDecision row: a "continue"
buffered and written in batches, its share of the batch writes timed with it, and a "compact"
committed synchronously). Transactional
database access, so the logged call runs as it does in a request (its own transaction). The full
1k/10k/100k table is ``manage.py bench_triggers``.
"""

from __future__ import annotations

import pytest
from django.db import connection

from triggers import bench

pytestmark = [pytest.mark.bench, pytest.mark.django_db(transaction=True)]


def test_decision_latency_is_flat_and_beats_whole_history_recounts():
    result = bench.run((1_000, 10_000), decisions=60, baseline_repeats=8, log=lambda _msg: None)
    report = bench.table(result)
    print("\n" + report)
    small, large = result["rows"]
    assert large["history_tokens"] > 5 * small["history_tokens"]
    # The decision: ≥ 10× faster than LangChain's approximate recount at 10k messages.
    assert large["decision_speedup_vs_langchain"] >= 10, report
    if large["langchain_middleware"]:
        assert large["decision_speedup_vs_middleware"] >= 10, report
    # The logged service call (with its durable write) still beats an exact recount ≥ 10×.
    assert large["logged_speedup_vs_tiktoken"] >= 10, report
    assert large["logged_compact_speedup_vs_tiktoken"] >= 10, report
    if large["langchain_middleware"] and connection.vendor == "postgresql":
        # The logged "continue" (buffered row) ≥ 10× LangChain's middleware check at 10k.
        assert large["logged_speedup_vs_middleware"] >= 10, report
    # Flat: 10× more history must not make MemoryHub meaningfully slower (recounts grow ~10×).
    for key in ("memoryhub_engine", "memoryhub_decision", "memoryhub_logged", "memoryhub_logged_compact"):
        assert result["growth"][key] <= 3, report
    assert result["growth"]["langchain_approx"] >= 5, report
