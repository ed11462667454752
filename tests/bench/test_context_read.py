"""Benchmark (timing thresholds live only here): a context read does not slow down with history.

A small and a large history live in the same PostgreSQL database, each with an active summary and
a 20-event tail, served by a real gunicorn process. The full 1k vs 1M run is
``manage.py bench context_read`` (once registered) or ``context_read.run()``; this test
uses MEMORYHUB_BENCH_CONTEXT_EVENTS (default 100k). Run with ``pytest -m bench`` on PostgreSQL.
"""

from __future__ import annotations

import os

import pytest

from memoryhub.bench import context_read

pytestmark = [pytest.mark.bench, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_context_read_p50_is_flat_in_history_size_and_close_to_a_trivial_endpoint():
    large = int(os.environ.get("MEMORYHUB_BENCH_CONTEXT_EVENTS", "100000"))
    result = context_read.run(small=1_000, large=large, tail=20, rounds=200, log=lambda _msg: None)
    print(result)
    assert result["service_p50_ms"]["large"] <= 1.3 * result["service_p50_ms"]["small"] + 1, result
    for mode in ("http", "http_persistent_connections"):
        figures = result[mode]
        assert figures["ratio_large_to_small"] <= 1.3, (mode, figures)
        assert figures["ratio_small_to_trivial"] <= 2.0, (mode, figures)
        assert figures["ratio_large_to_trivial"] <= 2.0, (mode, figures)
