"""Benchmark: OTLP span ingest next to the events API on the same rows (``manage.py bench otel``).

Run with ``pytest -m bench`` on PostgreSQL. The thresholds are loose floors: OTLP stores every span
with all its attributes (idempotency, nothing lost), so it is slower per row than the events API.
"""

from __future__ import annotations

import pytest

from memoryhub.bench import otel

pytestmark = [pytest.mark.bench, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_otlp_ingest_rate_is_reported_beside_the_events_api():
    result = otel.run(spans=1_100, batch=110, conversations=2, log=lambda _msg: None)
    print(result)
    assert result["event_rows"] == 1_000 * 2 + 100  # 1,000 tool spans → pairs, 100 agent spans → notes
    assert result["ratio_otel_to_events_api"] >= 0.1, result
    assert result["otel_resend_spans_per_second"] > result["otel_spans_per_second"], result
