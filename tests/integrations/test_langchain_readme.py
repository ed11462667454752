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


LANGCHAIN = section("## LangChain agents (`memoryhub[langchain]`)")


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
