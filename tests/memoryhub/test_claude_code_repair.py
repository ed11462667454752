"""Close the loop (issue #32) with Claude Code: the SessionStart hook after a compaction hands back
what the compaction lost, as ``additionalContext``, from the server's verdict."""

from __future__ import annotations

import io
import json
import time

import pytest

from memoryhub.core.actors import Actor
from memoryhub.examples.repair_scenario import (
    CONSTRAINT,
    LOSSY_SUMMARY,
    MUST_RETURN,
    ORDER_ID,
    REQUIREMENT,
    TURNS,
)
from memoryhub.integrations import claude_code
from memoryhub.models import CompactionJob
from triggers.services import save_policy

from .test_claude_code_hook import SESSION, Transcript, _hook_input

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(tmp_path, live_server, alice, monkeypatch):
    directory = tmp_path / "hook"
    monkeypatch.setenv("MEMORYHUB_HOOK_DIR", str(directory))
    monkeypatch.setenv("MEMORYHUB_URL", live_server.url)
    monkeypatch.setenv("MEMORYHUB_API_KEY", alice.key.secret)
    return directory


def _lossy_session(t: Transcript, summary: str | None = LOSSY_SUMMARY) -> None:
    for role, text in TURNS:
        if role == "user":
            t.user(text)
        else:
            t.assistant(text)
    t.compact(summary, pre_tokens=150_000)


def _hook(data: dict, capsys) -> tuple[str, float]:
    started = time.monotonic()
    assert claude_code.main(stdin=io.StringIO(json.dumps(data))) == 0
    return capsys.readouterr().out, time.monotonic() - started


def _session_start(path) -> dict:
    return {**_hook_input(path, "SessionStart"), "source": "compact"}


def test_session_start_after_compaction_hands_back_all_four_obligations_first(tmp_path, env, capsys):
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t)
    out, _ = _hook(_hook_input(t.path, "PostCompact"), capsys)
    assert out == ""  # PostCompact prints nothing
    out, seconds = _hook(_session_start(t.path), capsys)
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == "SessionStart"
    context = answer["additionalContext"]
    for value in MUST_RETURN:  # what the model reads next holds all four again
        assert value in context, value
    assert context.index(REQUIREMENT) < context.index(ORDER_ID)  # obligations first
    assert context.index(CONSTRAINT) < context.index(ORDER_ID)
    assert "[seq " in context and LOSSY_SUMMARY not in context
    assert seconds < claude_code.hook_timeout()  # within the hook's deadline
    # Handed back once: a later SessionStart (a resume) prints nothing more, and the local state
    # keeps no conversation text after delivering it.
    assert _hook(_session_start(t.path), capsys)[0] == ""
    state = claude_code.SessionState.load(env, SESSION)
    assert state.handback["delivered"] and state.handback["text"] == ""
    job = CompactionJob.objects.get(workflow__external_id=SESSION)
    assert job.attempts[0]["repair"]["verdict"] == "repaired"


def test_session_start_alone_records_the_compaction_and_answers_in_the_same_run(tmp_path, env, capsys):
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t)
    t.user("continue please")  # Claude Code went on; no PostCompact hook is registered
    out, _ = _hook(_session_start(t.path), capsys)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert all(value in context for value in MUST_RETURN)


def test_a_compaction_that_kept_everything_adds_nothing(tmp_path, env, capsys):
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t, summary=" ".join(text for _, text in TURNS))
    out, _ = _hook(_session_start(t.path), capsys)
    assert out == ""


def test_a_boundary_without_summary_hands_back_the_tail(tmp_path, env, capsys):
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t, summary=None)
    t.user("the conversation goes on without a summary")
    out, _ = _hook(_session_start(t.path), capsys)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert all(value in context for value in MUST_RETURN)
    assert CompactionJob.objects.get(workflow__external_id=SESSION).attempts[0]["repair"]["empty_summary"]


def test_gate_observe_hands_back_nothing_and_block_hands_back_instead(tmp_path, env, capsys, alice):
    save_policy(alice.tenant, {"repair": {"gate": "observe"}}, Actor.system("t"), partial=True)
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t)
    assert _hook(_session_start(t.path), capsys)[0] == ""
    assert (
        CompactionJob.objects.get(workflow__external_id=SESSION).attempts[0]["repair"]["verdict"]
        == "observed"
    )

    save_policy(alice.tenant, {"repair": {"gate": "block"}}, Actor.system("t"), partial=True)
    t2 = Transcript(tmp_path / "s2.jsonl", session_id="5f1c2a9e-0000-4000-8000-000000000002")
    _lossy_session(t2)
    data = {**_session_start(t2.path), "session_id": t2.session_id}
    context = json.loads(_hook(data, capsys)[0])["hookSpecificOutput"]["additionalContext"]
    assert ORDER_ID in context  # Claude Code cannot keep its old context: handed back instead
    stored = CompactionJob.objects.get(workflow__external_id=t2.session_id).attempts[0]["repair"]
    assert stored["verdict"] == "repaired" and "cannot keep the previous context" in stored["note"]


def test_memoryhub_down_prints_nothing_and_exits_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMORYHUB_HOOK_DIR", str(tmp_path / "hook"))
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_x")
    monkeypatch.setenv("MEMORYHUB_HOOK_TIMEOUT", "1")
    t = Transcript(tmp_path / "s.jsonl")
    _lossy_session(t)
    out, seconds = _hook(_session_start(t.path), capsys)
    assert out == "" and seconds < 2
