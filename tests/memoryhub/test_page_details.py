"""Small page details with a server-side half: JSON shown once (decoded, not double-encoded), a
rule chart with one point spans the rule's window, the channel form's refusal of a local URL
names the setting that allows it, open items render as key · text · state (never a Python dict)."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.template.loader import render_to_string

from memoryhub.observe.alerting.figures import time_range
from memoryhub.observe.alerting.transports.guard import UnsafeURL, check_url
from memoryhub.templatetags.json_tags import pretty_json


def test_json_text_inside_json_is_shown_once():
    args = json.dumps({"amount": 649, "items": json.dumps(["LEG-ALU-72"])})
    shown = pretty_json({"name": "refund", "arguments": args})
    assert '\\"' not in shown
    assert json.loads(shown) == {"arguments": {"amount": 649, "items": ["LEG-ALU-72"]}, "name": "refund"}
    assert pretty_json("not json {") == "not json {"


def test_one_point_spans_the_rules_window():
    at = datetime(2026, 12, 3, 7, 7, 33, 194000, tzinfo=UTC)
    start, end = (datetime.fromisoformat(v) for v in time_range([at], timedelta(minutes=15)))
    assert end - start >= timedelta(minutes=15) and start < at < end
    assert time_range([], timedelta(minutes=15)) is None


def test_local_url_refusal_names_the_allow_list_setting():
    with pytest.raises(UnsafeURL) as refused:
        check_url("http://127.0.0.1:9000/hook")
    assert "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS" in str(refused.value)


def test_open_items_render_without_python_dicts():
    page = render_to_string(
        "memoryhub/partials/open_items.html", {"items": [{"key": "bug-88", "state": "open"}, ["odd", 1]]}
    )
    assert (
        "{'key'" not in page
        and "<code>bug-88</code>" in page
        and "open" in page
        and '"odd"' in html.unescape(page)
    )
