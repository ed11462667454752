"""The README's LangChain section and client-layer section, run as written (fake models, live server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from memoryhub.client import NotConfigured
from memoryhub.client.resilience import ResilientHub
from memoryhub.models import ConsumerTrace, Event, Workflow

from .lc_script import FakeSummarizer, ScriptedModel, lookup

README = Path(settings.BASE_DIR, "README.md").read_text()


def section(title: str) -> str:
    start = README.index(title)
    end = README.index("\n## ", start + 1)
    return README[start:end]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


LANGCHAIN = section("## LangChain agents (`memoryhub-audit-client[langchain]`)")


def test_the_readme_example_runs_as_written(live_server, alice, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYHUB_URL", live_server.url)
    monkeypatch.setenv("MEMORYHUB_API_KEY", alice.key.secret)
    monkeypatch.setenv("MEMORYHUB_SPOOL_DIR", str(tmp_path))
    example = python_blocks(LANGCHAIN)[0]
    scope = {"model": ScriptedModel(), "tools": [lookup], "summary_model": FakeSummarizer()}
    exec(compile(example, "README.md", "exec"), scope)
    assert ResilientHub.from_env(component="readme").flush(timeout=30)  # same spool: deliver it
    workflow = Workflow.objects.get(external_id="support-42")
    assert workflow.source == "langchain"
    assert Event.objects.filter(workflow=workflow, role="user", content="Where is order A-1001?").count() == 1
    trace = ConsumerTrace.objects.get(workflow=workflow)
    # "the AI message's response_metadata["memoryhub_model_call_id"] names the call's consumer trace"
    assert scope["result"]["messages"][-1].response_metadata["memoryhub_model_call_id"] == trace.model_call_id
    assert trace.flags == []  # the server attested the read


def test_the_readme_example_without_configuration_fails_at_construction(monkeypatch):
    monkeypatch.delenv("MEMORYHUB_URL", raising=False)
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_x")
    scope = {"model": ScriptedModel(), "tools": [lookup], "summary_model": FakeSummarizer()}
    with pytest.raises(NotConfigured, match="MEMORYHUB_URL"):
        exec(compile(python_blocks(LANGCHAIN)[0], "README.md", "exec"), scope)


def test_the_readme_figures_name_the_benchmark_that_produces_them():
    assert "manage.py bench langchain" in LANGCHAIN
    from memoryhub.management.commands.bench import BENCHMARKS

    assert "langchain" in BENCHMARKS
    for claim in ("default\n200 ms", "MEMORYHUB_DEADLINE_MS", "MEMORYHUB_SPOOL_DIR", "NotConfigured"):
        assert claim.replace("\n", " ") in LANGCHAIN.replace("\n", " ")
    from memoryhub.client.resilience import DEFAULT_DEADLINE, default_spool_dir

    assert DEFAULT_DEADLINE == 0.2
    assert str(default_spool_dir("langchain")).endswith(".cache/memoryhub/spool/langchain")


def test_the_client_layer_snippet_runs_as_written(live_server, alice, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYHUB_URL", live_server.url)
    monkeypatch.setenv("MEMORYHUB_API_KEY", alice.key.secret)
    monkeypatch.setenv("MEMORYHUB_SPOOL_DIR", str(tmp_path))
    assert alice.api.post("/api/v1/workflows/", {"external_id": "wf"}, format="json").status_code == 201
    body = {
        "create": {},
        "events": [{"kind": "message", "role": "user", "content": "hi", "client_event_id": "r1"}],
    }
    trace = {
        "agent": "a",
        "agent_run_id": "r",
        "model_call_id": "m1",
        "summary_id": None,
        "tail_to_seq": 0,
    }
    snippet = python_blocks(section("### The client's never-hurt-the-agent layer"))[0]
    scope = {"trace": trace, "body": body}
    exec(compile(snippet, "README.md", "exec"), scope)
    assert scope["answer"]["head_seq"] == 1
    assert ConsumerTrace.objects.filter(model_call_id="m1").exists()
    assert Event.objects.filter(workflow__external_id="wf").count() == 1


def _ms(cell: str) -> float:
    return float(re.sub(r"[^\d.]", "", cell))


def test_the_readme_cost_tables_agree_with_themselves_and_meet_the_targets():
    """The figures are pasted from one `manage.py bench langchain` run; this checks what can be
    checked without re-running it: each ratio is its row's quotient, and the targets hold
    (≥ 10× at 10k, ≥ 50× at 100k, growth ≤ 1.5×; repair ≤ 20 ms p50 and one round trip)."""
    rows = {
        m.group(1): [c.strip() for c in m.group(2).split("|")]
        for m in re.finditer(r"^\| (1k|10k|100k) messages \|(.*)\|$", LANGCHAIN, re.M)
    }
    assert set(rows) == {"1k", "10k", "100k"}, rows
    for size, (langchain, agent, ratio, _synced) in rows.items():
        assert abs(_ms(langchain) / _ms(agent) - _ms(ratio)) <= 0.05 * _ms(ratio), (size, rows[size])
    assert _ms(rows["10k"][2]) >= 10 and _ms(rows["100k"][2]) >= 50
    growth = re.search(r"Growth 1k → 100k: ([\d.]+)× for the agent's wait", LANGCHAIN)
    assert growth and float(growth.group(1)) <= 1.5
    assert abs(_ms(rows["100k"][1]) / _ms(rows["1k"][1]) - float(growth.group(1))) <= 0.02

    repair = section("## Closing the loop")
    without = re.search(r"^\| `repair=False`[^|]*\| ([\d.]+) ms \|.*\| (\d+) \|$", repair, re.M)
    with_repair = re.search(r"^\| repair on [^|]*\| ([\d.]+) ms \| ([\d.]+) ms \| (\d+) \|$", repair, re.M)
    overhead = re.search(r"^\| \*\*overhead\*\* \| \*\*\+([\d.]+) ms\*\* \|", repair, re.M)
    assert without and with_repair and overhead, "README lacks the repair cost table"
    assert abs(float(with_repair.group(1)) - float(without.group(1)) - float(overhead.group(1))) <= 0.02
    assert float(overhead.group(1)) <= 20
    assert (int(without.group(2)), int(with_repair.group(3))) == (0, 1)
