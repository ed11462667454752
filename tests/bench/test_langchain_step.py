"""Benchmark smoke: the LangChain middleware's cost per model call beside SummarizationMiddleware
(``manage.py bench langchain``). Small sizes here (``pytest -m bench`` on PostgreSQL); the README
figures come from the full run at 1k/10k/100k messages."""

from __future__ import annotations

import pytest

from memoryhub.bench import langchain_step

pytestmark = [pytest.mark.bench, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_agent_path_is_flat_and_everything_reaches_the_server():
    result = langchain_step.run([500, 5_000], calls=8, log=lambda _msg: None)
    print(result)
    small, large = result["500"], result["5000"]
    # run() raises unless every event and trace reached the server exactly once.
    assert large["langchain_ms"] > small["langchain_ms"]  # LangChain recounts the whole history
    assert result["agent_growth"] <= 1.5, result
    assert large["agent_speedup"] >= 5, result
    # The repair step (run() raises unless every repaired summary holds the four lost items): one
    # request waited for on a compaction turn, none without repair.
    repair = result["repair"]
    assert (repair["round_trips"], repair["round_trips_without"]) == (1, 0), repair
    assert repair["with_repair_p50_ms"] > repair["without_repair_p50_ms"], repair
