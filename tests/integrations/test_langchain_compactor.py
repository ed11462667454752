"""The compactor recorded for a LangChain-side summary names the model and the prompt that wrote it."""

from __future__ import annotations

import tempfile

from memoryhub.client import MemoryHubClient
from memoryhub.client.resilience import ResilientHub
from memoryhub.examples.langchain_example import ExtractiveSummarizer, ScriptedAgentModel
from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware


def middleware(**kwargs) -> MemoryHubSummarizationMiddleware:
    client = MemoryHubClient("http://127.0.0.1:9")  # never called here
    hub = ResilientHub(client=client, spool_dir=tempfile.mkdtemp())
    return MemoryHubSummarizationMiddleware(ScriptedAgentModel(messages=iter([])), hub=hub, **kwargs)


def summarize_with_service(messages) -> str:
    return "summary"


def test_the_agent_model_with_the_default_prompt():
    assert middleware().compactor() == {
        "name": "langchain-summarization",
        "model": "scripted-agent-1",
        "prompt_template_version": "langchain-default",
    }


def test_a_separate_summarizer_model_with_a_custom_prompt():
    compactor = middleware(
        summarizer=ExtractiveSummarizer(), summary_prompt="Summarize: {messages}"
    ).compactor()
    assert compactor["model"] == "extractive-summarizer-1"
    assert compactor["prompt_template_version"].startswith("sha256:")
    assert (
        compactor["prompt_template_version"]
        != middleware(summary_prompt="Other {messages}").compactor()["prompt_template_version"]
    )


def test_a_summarizer_function_is_named_and_gets_no_prompt():
    assert middleware(summarizer=summarize_with_service).compactor() == {
        "name": "langchain-summarizer",
        "model": "summarize_with_service",
    }


def test_a_langchain_trigger_is_honoured_and_none_means_the_memoryhub_policy():
    honoured = middleware(trigger=("tokens", 4000))
    assert honoured._trigger_clauses == [{"tokens": 4000}] and honoured.policy_decides is False
    assert middleware().policy_decides is True
