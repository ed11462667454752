"""`manage.py bench scale-pages` measures the pages again on the dataset `bench scale` left
(functional check on a small dataset; the figures are README's, from the full one)."""

from __future__ import annotations

import pytest

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.bench import dataset, scale
from memoryhub.memory.workflows import create_workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_without_a_scale_dataset_it_says_which_command_builds_one():
    with pytest.raises(RuntimeError, match="bench scale"):
        scale.pages_again(log=lambda _line: None)


def test_it_measures_the_newest_scale_dataset_big_against_empty():
    for stamp in ("20260101000000", "20260202000000"):  # the newest one is measured
        tenant = create_tenant(f"bench-scale-{stamp}", "Scale benchmark")
        empty = create_tenant(f"bench-empty-{stamp}", "Empty tenant")
        create_workflow(empty, "empty", actor=scale.ACTOR)
    dataset.build(tenant, workflows=20, log=lambda _line: None)
    dataset.history_workflow(tenant, "hist-1k", 200, log=lambda _line: None)
    dataset.history_workflow(tenant, "hist-1m", 600, log=lambda _line: None)
    lines: list[str] = []
    result = scale.pages_again(rounds=40, log=lines.append)
    assert result["dataset"] == "20260202000000"
    assert set(result["pages"]) == {"overview", "workflow_list", "workflow_detail"}
    for name, page in result["pages"].items():
        assert page["p50_ms_big"] > 0 and page["p50_ms_empty"] > 0, name
        assert page["queries_constant"], (name, page)
    assert any(line.strip().startswith("overview") for line in lines)
