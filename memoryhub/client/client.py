"""Synchronous HTTP client for the MemoryHub REST API v1 (httpx; no Django).

Retries: 429 (honouring ``Retry-After``), 5xx and connection errors are retried with exponential
backoff and jitter. Only requests that are safe to repeat get the full treatment:

* GET/PUT/DELETE, and POSTs the server makes idempotent — workflow create (external_id), event
  appends (every event carries a ``client_event_id`` fixed *before* the first try), compaction
  requests (source revision), traces (model_call_id), artifacts (identical duplicate = no-op) and
  the stateless trigger what-if;
* every other POST (activation CAS, review actions, summary submission, purge, …) is retried only
  when the server certainly did not act: the connection was never established, or it answered
  429 / 503. A lost answer to such a POST surfaces as an error instead of a silent double action.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from . import anthropic
from .errors import (
    ApiError,
    CompactionTimeout,
    Conflict,
    NotConfigured,
    TransportError,
    error_for_status,
)
from .types import (
    AppendResult,
    Artifact,
    Context,
    Decision,
    Event,
    Job,
    Summary,
    Trace,
    Workflow,
)

__all__ = ["MemoryHubClient"]

USER_AGENT = "memoryhub-client/0.1"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Statuses that prove the server did not act on the request: safe to repeat even a non-idempotent POST.
UNPROCESSED_STATUSES = frozenset({429, 503})
# Connection failures where the request never reached the server.
_NOT_SENT_ERRORS: tuple[type[Exception], ...] = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

JSON = dict[str, Any]


def _wf(workflow_id: str) -> str:
    """Quote a workflow external_id as one path segment."""
    return quote(str(workflow_id), safe="")


def _drop_none(data: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in data.items() if v is not None}


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class MemoryHubClient:
    """Client for one MemoryHub tenant (the API key decides the tenant).

    ``max_retries`` is the number of *re*-tries (total attempts = max_retries + 1). The n-th retry
    waits ``min(max_backoff, backoff * 2**n)`` scaled by a random factor in [0.5, 1] (jitter), or
    exactly the server's ``Retry-After`` on 429/503; a ``Retry-After`` above ``max_retry_after``
    is not waited for and the error is raised at once. ``sleep`` and ``rng`` are injectable so the
    retry schedule can be observed without waiting.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        max_retries: int = 3,
        backoff: float = 0.25,
        *,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        stale_context_retries: int = 5,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.stale_context_retries = max(0, int(stale_context_retries))
        self.max_retries = max(0, int(max_retries))
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._rng = rng or random.Random()
        all_headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=all_headers, transport=transport
        )
        # Served by this process (WSGI): requests must stay on the caller's thread (its database
        # connection and transaction), so wrappers must not hand them to a worker thread.
        self.in_process = isinstance(transport, httpx.WSGITransport)

    @classmethod
    def from_env(cls, **kwargs: Any) -> MemoryHubClient:
        """Build from ``MEMORYHUB_URL`` and ``MEMORYHUB_API_KEY``, both required: a missing one raises
        :class:`NotConfigured` here rather than silently targeting some default address."""
        url = os.environ.get("MEMORYHUB_URL", "").strip()
        key = os.environ.get("MEMORYHUB_API_KEY", "").strip()
        if not url:
            raise NotConfigured(
                "MEMORYHUB_URL is not set: MemoryHub has no default address; set it (or pass a client)"
            )
        if not key:
            raise NotConfigured(
                "MEMORYHUB_API_KEY is not set: create an API key and export it (or pass a client)"
            )
        return cls(url, key, **kwargs)

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryHubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------------

    def _delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        base = min(self.max_backoff, self.backoff * (2**retry))
        return base * (0.5 + 0.5 * self._rng.random())

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
    ) -> httpx.Response:
        """Send one logical request with retries; return the successful response or raise.

        ``idempotent`` defaults to True for everything but POST.
        """
        if idempotent is None:
            idempotent = method.upper() != "POST"
        clean_params = _drop_none(params) if params else None
        retry = 0
        while True:
            try:
                response = self._http.request(method, path, params=clean_params, json=json)
            except httpx.TransportError as exc:
                may_retry = idempotent or isinstance(exc, _NOT_SENT_ERRORS)
                if not may_retry or retry >= self.max_retries:
                    raise TransportError(
                        f"{method} {path} failed after {retry + 1} attempt(s): {exc!r}",
                        attempts=retry + 1,
                        cause=exc,
                    ) from exc
                self._sleep(self._delay(retry, None))
                retry += 1
                continue
            if response.is_success:
                return response
            status = response.status_code
            retryable = status in RETRY_STATUSES and (idempotent or status in UNPROCESSED_STATUSES)
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if (
                retryable
                and retry < self.max_retries
                and (retry_after is None or retry_after <= self.max_retry_after)
            ):
                self._sleep(self._delay(retry, retry_after if status in UNPROCESSED_STATUSES else None))
                retry += 1
                continue
            error = self._error(response, retry_after)
            error.retries = retry
            raise error

    @staticmethod
    def _error(response: httpx.Response, retry_after: float | None) -> ApiError:
        status = response.status_code
        payload: JSON = {}
        try:
            decoded = response.json()
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            payload = decoded
        code = str(payload.get("error") or f"http_{status}")
        detail = payload.get("detail")
        if detail is None:
            detail = response.text[:500] if not payload else ""
        if not isinstance(detail, str):
            detail = str(detail)
        return error_for_status(status, code, detail, payload, retry_after=retry_after)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _pages(self, path: str, params: Mapping[str, Any] | None, key: str) -> Iterator[JSON]:
        """Yield items across pages: a bare list, DRF ``{"results", "next"}``, or ``{key, "next_after"}``."""
        url: str | None = path
        query: Mapping[str, Any] | None = params
        while url:
            data = self._json("GET", url, params=query)
            if isinstance(data, list):
                yield from data
                return
            items = data.get(key, data.get("results", []))
            yield from items
            nxt = data.get("next")
            if isinstance(nxt, str) and nxt:
                url, query = nxt, None  # the next link already carries the query
            elif data.get("next_after") is not None and items:
                url, query = path, {**(params or {}), "after": data["next_after"]}  # keyset paging
            elif data.get("has_more") and items and key == "events":
                url, query = path, {**(params or {}), "after": items[-1]["seq"]}
            else:
                url = None

    # -- workflows and events --------------------------------------------------------------------

    def create_workflow(
        self, external_id: str, name: str | None = None, graph_release: str | None = None, **extra: Any
    ) -> Workflow:
        """Create a workflow, or return the existing one with this external_id (idempotent)."""
        body = _drop_none({"external_id": external_id, "name": name, "graph_release": graph_release, **extra})
        return Workflow.from_dict(self._json("POST", "/api/v1/workflows/", json=body, idempotent=True))

    def list_workflows(self, **filters: Any) -> list[Workflow]:
        return [Workflow.from_dict(w) for w in self._pages("/api/v1/workflows/", filters, "workflows")]

    def get_workflow(self, workflow_id: str) -> Workflow:
        return Workflow.from_dict(self._json("GET", f"/api/v1/workflows/{_wf(workflow_id)}/"))

    def append_events(
        self, workflow_id: str, events: Iterable[Mapping[str, Any]], expected_head: int | None = None
    ) -> AppendResult:
        """Append an atomic batch of events; a retry re-sends the very same client_event_ids.

        Events without a ``client_event_id`` get a uuid4 here, before the first attempt. With
        ``expected_head`` the batch is refused (Conflict) if the head moved; if that happens on a
        *retry*, the client checks whether its own earlier attempt is what moved the head (the
        events after ``expected_head`` carry exactly our ids) and then returns that result.
        """
        batch = []
        for event in events:
            item = dict(event)
            if not item.get("client_event_id"):
                item["client_event_id"] = str(uuid.uuid4())
            batch.append(item)
        body: JSON = {"events": batch}
        if expected_head is not None:
            body["expected_head"] = expected_head
        path = f"/api/v1/workflows/{_wf(workflow_id)}/events/"
        try:
            data = self._json("POST", path, json=body, idempotent=True)
        except Conflict as exc:
            if expected_head is None or exc.retries == 0:
                raise
            recovered = self._recover_append(workflow_id, batch, expected_head)
            if recovered is None:
                raise
            return recovered
        return AppendResult.from_dict(data)

    def _recover_append(self, workflow_id: str, batch: list[JSON], expected_head: int) -> AppendResult | None:
        stored = self.list_events(workflow_id, after=expected_head, until=expected_head + len(batch))
        if [e.client_event_id for e in stored] != [e["client_event_id"] for e in batch]:
            return None
        workflow = self.get_workflow(workflow_id)
        return AppendResult.from_dict(
            {
                "events": [
                    {
                        "seq": e.seq,
                        "client_event_id": e.client_event_id,
                        "token_count": e.token_count,
                        "content_hash": e.content_hash,
                    }
                    for e in stored
                ],
                "head_seq": workflow.head_seq,
                "total_tokens": workflow.total_tokens,
                "recovered": True,
            }
        )

    def iter_events(
        self, workflow_id: str, after: int | None = None, until: int | None = None, **params: Any
    ) -> Iterator[Event]:
        """Iterate stored events with ``after < seq <= until``, following pages."""
        query = {"after": after, "until": until, **params}
        for item in self._pages(f"/api/v1/workflows/{_wf(workflow_id)}/events/", _drop_none(query), "events"):
            yield Event.from_dict(item)

    def list_events(
        self, workflow_id: str, after: int | None = None, until: int | None = None, **params: Any
    ) -> list[Event]:
        return list(self.iter_events(workflow_id, after=after, until=until, **params))

    # -- context, triggers, policy ---------------------------------------------------------------

    def get_context(
        self, workflow_id: str, min_seq: int | None = None, *, stale_retries: int | None = None
    ) -> Context:
        """Active summary + every event after its watermark.

        ``min_seq`` is the read-after-write guard: a server (or read replica) whose head is below it
        answers 409 ``stale_context`` with ``Retry-After`` rather than a stale tail. That answer is
        retried ``stale_retries`` times (default: the client's ``stale_context_retries``), waiting
        what the server asks, then raised as :class:`Conflict`.
        """
        params = {"min_seq": min_seq} if min_seq is not None else None
        path = f"/api/v1/workflows/{_wf(workflow_id)}/context/"
        retries_left = self.stale_context_retries if stale_retries is None else stale_retries
        while True:
            try:
                return Context.from_dict(self._json("GET", path, params=params))
            except Conflict as exc:
                if exc.code != "stale_context" or retries_left <= 0:
                    raise
                retries_left -= 1
                hint = exc.payload.get("retry_after")
                wait = float(hint) if isinstance(hint, int | float) else self.backoff
                self._sleep(min(self.max_retry_after, wait))

    def trigger(
        self,
        workflow_id: str,
        expected_next_step_tokens: int,
        checkpoint_safe: bool = True,
        remaining_steps: int | None = None,
        **extra: Any,
    ) -> Decision:
        """Ask "compact now?" for the next step; the decision is logged server-side."""
        body = _drop_none(
            {
                "expected_next_step_tokens": expected_next_step_tokens,
                "checkpoint_safe": checkpoint_safe,
                "remaining_steps": remaining_steps,
                **extra,
            }
        )
        path = f"/api/v1/workflows/{_wf(workflow_id)}/trigger/"
        return Decision.from_dict(self._json("POST", path, json=body, idempotent=True))

    def evaluate_trigger(
        self, policy: Mapping[str, Any] | None = None, workflow: str | None = None, **inputs: Any
    ) -> Decision:
        """Stateless what-if: an inline policy (or a workflow's) plus explicit inputs; not logged."""
        body = _drop_none(
            {"policy": dict(policy) if policy is not None else None, "workflow": workflow, **inputs}
        )
        return Decision.from_dict(
            self._json("POST", "/api/v1/triggers/evaluate/", json=body, idempotent=True)
        )

    def list_decisions(self, workflow_id: str, **filters: Any) -> list[Decision]:
        """The workflow's logged trigger decisions, newest first (``action=`` filters)."""
        path = f"/api/v1/workflows/{_wf(workflow_id)}/decisions/"
        return [Decision.from_dict(d) for d in self._pages(path, filters, "decisions")]

    def get_policy(self, workflow_id: str) -> JSON:
        return self._json("GET", f"/api/v1/workflows/{_wf(workflow_id)}/policy/")

    def put_policy(self, workflow_id: str, policy: Mapping[str, Any]) -> JSON:
        return self._json("PUT", f"/api/v1/workflows/{_wf(workflow_id)}/policy/", json=dict(policy))

    # -- the per-model-call round trip -----------------------------------------------------------

    @staticmethod
    def step_path(workflow_id: str) -> str:
        return f"/api/v1/workflows/{_wf(workflow_id)}/step/"

    @staticmethod
    def step_body(
        *,
        events: Iterable[Mapping[str, Any]] = (),
        compactions: Iterable[Mapping[str, Any]] = (),
        traces: Iterable[Mapping[str, Any]] = (),
        decide: Mapping[str, Any] | None = None,
        create: Mapping[str, Any] | None = None,
        context: bool = False,
    ) -> JSON:
        """The JSON body of :meth:`step` (also what a spool keeps to replay it)."""
        body: JSON = {"context": True} if context else {}
        if create is not None:
            body["create"] = _drop_none(create)
        for key, items in (("events", events), ("compactions", compactions), ("traces", traces)):
            listed = [dict(item) for item in items]
            if listed:
                body[key] = listed
        if decide is not None:
            body["decide"] = _drop_none(decide)
        return body

    def step(self, workflow_id: str, body: Mapping[str, Any]) -> JSON:
        """``POST …/step/``: append events (each with its ``client_event_id``), record observed
        compactions and consumer traces (by client ids), optionally decide — one transaction, one
        round trip, idempotent as a whole (build ``body`` with :meth:`step_body`)."""
        return self._json("POST", self.step_path(workflow_id), json=dict(body), idempotent=True)

    # -- compaction --------------------------------------------------------------------------------

    def request_compaction(self, workflow_id: str, source_revision: int | None = None, **extra: Any) -> Job:
        """Enqueue (or find) the compaction job for ``source_revision`` (default: head)."""
        body = _drop_none({"source_revision": source_revision, **extra})
        path = f"/api/v1/workflows/{_wf(workflow_id)}/compactions/"
        return Job.from_dict(self._json("POST", path, json=body, idempotent=True))

    def get_compaction(self, job_id: str) -> Job:
        return Job.from_dict(self._json("GET", f"/api/v1/compactions/{quote(str(job_id), safe='')}/"))

    def list_compactions(self, workflow_id: str, **filters: Any) -> list[Job]:
        path = f"/api/v1/workflows/{_wf(workflow_id)}/compactions/"
        return [Job.from_dict(j) for j in self._pages(path, filters, "jobs")]

    def wait_for_compaction(self, job_id: str, timeout: float = 30.0, poll_interval: float = 0.25) -> Job:
        """Poll the job until it succeeds or fails; raise CompactionTimeout after ``timeout`` seconds.

        A failed job is returned (check ``job.failed``), not raised: the caller picks the fallback.
        """
        deadline = time.monotonic() + timeout
        interval = poll_interval
        while True:
            job = self.get_compaction(job_id)
            if job.finished:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CompactionTimeout(str(job_id), timeout, job.status)
            time.sleep(min(interval, remaining))
            interval = min(interval * 1.5, 2.0)

    # -- summaries and review actions --------------------------------------------------------------

    def list_summaries(self, workflow_id: str, **filters: Any) -> list[Summary]:
        path = f"/api/v1/workflows/{_wf(workflow_id)}/summaries/"
        return [Summary.from_dict(s) for s in self._pages(path, filters, "summaries")]

    def submit_summary(
        self,
        workflow_id: str,
        covers_from_seq: int,
        covers_to_seq: int,
        content: Mapping[str, Any],
        compactor: Mapping[str, Any],
        source_refs: list[str] | None = None,
        excluded_categories: list[str] | None = None,
        **extra: Any,
    ) -> Summary:
        """Submit an externally produced candidate summary (status CANDIDATE)."""
        body = _drop_none(
            {
                "covers_from_seq": covers_from_seq,
                "covers_to_seq": covers_to_seq,
                "content": dict(content),
                "compactor": dict(compactor),
                "source_refs": source_refs,
                "excluded_categories": excluded_categories,
                **extra,
            }
        )
        return Summary.from_dict(
            self._json("POST", f"/api/v1/workflows/{_wf(workflow_id)}/summaries/", json=body)
        )

    def record_observed_compaction(
        self,
        workflow_id: str,
        covers_to_seq: int,
        compactor: Mapping[str, Any],
        *,
        text: str | None = None,
        opaque: Mapping[str, Any] | None = None,
        trigger: Mapping[str, Any] | None = None,
        observation_id: str | None = None,
        source_refs: list[str] | None = None,
        activate: bool = True,
    ) -> JSON:
        """Record a compaction a framework or provider performed (a summary version like any other).

        ``covers_to_seq`` is the last event it replaced; give ``text`` (readable summary) or
        ``opaque`` (``{"digest": "sha256:<hex>", "size_bytes": n}``). ``compactor`` is
        ``{"name": provider, "model"?, "settings"?}``; ``trigger`` is ``{"kind": "auto"|"manual",
        "pre_tokens"?, "threshold_tokens"?}``. Re-sending the same ``observation_id`` is safe.
        Returns ``{"summary_id", "version", "status", "validation", "activation", "created", …}``.
        """
        body = _drop_none(
            {
                "covers_to_seq": covers_to_seq,
                "compactor": dict(compactor),
                "text": text,
                "opaque": dict(opaque) if opaque is not None else None,
                "trigger": dict(trigger) if trigger is not None else None,
                "observation_id": observation_id,
                "source_refs": source_refs,
                "activate": activate,
            }
        )
        path = f"/api/v1/workflows/{_wf(workflow_id)}/observed-compactions/"
        # Idempotent by observation_id (derived server-side from the content when absent).
        return self._json("POST", path, json=body, idempotent=True)

    @staticmethod
    def repair_path(workflow_id: str) -> str:
        return f"/api/v1/workflows/{_wf(workflow_id)}/repair/"

    def repair_verdict(self, workflow_id: str, body: Mapping[str, Any]) -> JSON:
        """The server's verdict on a summary a framework is about to use, before it is recorded:
        ``{"text", "covers_to_event" | "covers_to_seq", "events"?, "can_block"?}`` →
        ``{"verdict", "items", "text", …}`` (``memoryhub.memory.repair``). Writes nothing."""
        return self._json("POST", self.repair_path(workflow_id), json=dict(body), idempotent=True)

    def record_anthropic_response(self, workflow_id: str, response: Any, **kwargs: Any) -> JSON:
        """Record an Anthropic Messages API response: its ``compaction`` block(s) as observed
        compactions, its text as events, the call as a trace (see
        ``memoryhub.client.anthropic.record_anthropic_response``)."""
        return anthropic.record_anthropic_response(self, workflow_id, response, **kwargs)

    def list_observed_compactions(self, workflow_id: str) -> JSON:
        """``{"observed": [...], "threshold_in_force": {...} | None}``."""
        return self._json("GET", f"/api/v1/workflows/{_wf(workflow_id)}/observed-compactions/")

    def get_summary(self, summary_id: str) -> Summary:
        return Summary.from_dict(self._json("GET", self._summary_path(summary_id)))

    def verify_summary(self, summary_id: str) -> JSON:
        """Recompute the content hash server-side and compare it with the stored one."""
        return self._json("GET", self._summary_path(summary_id, "verify"))

    def diff_summary(self, summary_id: str, against: str) -> JSON:
        return self._json("GET", self._summary_path(summary_id, "diff"), params={"against": against})

    @staticmethod
    def _summary_path(summary_id: str, action: str | None = None) -> str:
        base = f"/api/v1/summaries/{quote(str(summary_id), safe='')}/"
        return f"{base}{action}/" if action else base

    def _action(self, summary_id: str, action: str, body: Mapping[str, Any]) -> JSON:
        return self._json("POST", self._summary_path(summary_id, action), json=_drop_none(body))

    def validate(self, summary_id: str) -> JSON:
        return self._action(summary_id, "validate", {})

    def activate(self, summary_id: str, expected_revision: int) -> JSON:
        """CAS activation; a lost race raises Conflict with ``current_revision``."""
        return self._action(summary_id, "activate", {"expected_revision": expected_revision})

    def rollback(self, summary_id: str, expected_revision: int, reason: str | None = None) -> JSON:
        return self._action(
            summary_id, "rollback", {"expected_revision": expected_revision, "reason": reason}
        )

    def approve(self, summary_id: str, reason: str | None = None) -> JSON:
        return self._action(summary_id, "approve", {"reason": reason})

    def quarantine(self, summary_id: str, reason: str) -> JSON:
        return self._action(summary_id, "quarantine", {"reason": reason})

    def reject(self, summary_id: str, reason: str) -> JSON:
        return self._action(summary_id, "reject", {"reason": reason})

    def waive(self, summary_id: str, reason: str, checks: list[str] | None = None) -> JSON:
        return self._action(summary_id, "waive", {"reason": reason, "checks": checks})

    def release(self, summary_id: str, reason: str) -> JSON:
        return self._action(summary_id, "release", {"reason": reason})

    # -- consumer traces and artifacts -------------------------------------------------------------

    def record_trace(
        self,
        workflow_id: str,
        *,
        agent: str,
        agent_run_id: str,
        model_call_id: str,
        summary_id: str | None,
        tail_to_seq: int,
        context_id: str | None = None,
        manifest_hash: str | None = None,
        graph_release: str | None = None,
        checkpoint_id: str | None = None,
        thread_id: str | None = None,
        source_refs: list[str] | None = None,
        input_tokens: int | None = None,
        input_messages: list[dict[str, Any]] | None = None,
        output: str | None = None,
        output_tokens: int | None = None,
        latency_ms: int | None = None,
        cost_usd: float | None = None,
        **extra: Any,
    ) -> Trace:
        """Record which summary + tail a model call consumed (idempotent on model_call_id), and,
        where known, what the call was sent and answered, its latency and cost (the trace page
        shows each as "not recorded" when left out)."""
        body = _drop_none(
            {
                "agent": agent,
                "agent_run_id": agent_run_id,
                "model_call_id": model_call_id,
                "tail_to_seq": tail_to_seq,
                "context_id": context_id,
                "manifest_hash": manifest_hash,
                "graph_release": graph_release,
                "checkpoint_id": checkpoint_id,
                "thread_id": thread_id,
                "source_refs": source_refs,
                "input_tokens": input_tokens,
                "input_messages": input_messages,
                "output": output,
                "output_tokens": output_tokens,
                "latency_ms": latency_ms,
                "cost_usd": cost_usd,
                **extra,
            }
        )
        body["summary_id"] = summary_id  # explicit null means "raw history, no summary"
        path = f"/api/v1/workflows/{_wf(workflow_id)}/traces/"
        return Trace.from_dict(self._json("POST", path, json=body, idempotent=True))

    def record_artifact(
        self,
        workflow_id: str,
        *,
        artifact_id: str,
        kind: str,
        produced_by: Mapping[str, Any],
        uri: str | None = None,
        content_hash: str | None = None,
        quality_score: float | None = None,
        **extra: Any,
    ) -> Artifact:
        """Record a published artifact; ``produced_by`` is {"model_call_id"} or {"agent_run_id"}."""
        body = _drop_none(
            {
                "artifact_id": artifact_id,
                "kind": kind,
                "produced_by": dict(produced_by),
                "uri": uri,
                "content_hash": content_hash,
                "quality_score": quality_score,
                **extra,
            }
        )
        path = f"/api/v1/workflows/{_wf(workflow_id)}/artifacts/"
        return Artifact.from_dict(self._json("POST", path, json=body, idempotent=True))

    def get_artifact(self, artifact_id: str) -> Artifact:
        return Artifact.from_dict(self._json("GET", f"/api/v1/artifacts/{quote(str(artifact_id), safe='')}/"))

    def list_artifacts(self, workflow_id: str, **filters: Any) -> list[Artifact]:
        path = f"/api/v1/workflows/{_wf(workflow_id)}/artifacts/"
        return [Artifact.from_dict(a) for a in self._pages(path, filters, "artifacts")]

    def list_traces(self, workflow_id: str, **filters: Any) -> list[Trace]:
        """A workflow's consumer traces, newest first (``flagged=True`` for problem traces only)."""
        path = f"/api/v1/workflows/{_wf(workflow_id)}/traces/"
        return [Trace.from_dict(t) for t in self._pages(path, filters, "traces")]

    def get_trace(self, trace_id: Any) -> Trace:
        return Trace.from_dict(self._json("GET", f"/api/v1/traces/{trace_id}/"))

    # -- audit ---------------------------------------------------------------------------------------

    def lineage(self, artifact_id: str) -> JSON:
        return self._json("GET", f"/api/v1/artifacts/{quote(str(artifact_id), safe='')}/lineage/")

    def investigate(self, artifact_id: str, fact: str, regex: bool = False) -> JSON:
        """Classify why ``fact`` is missing from an artifact (verdict + evidence + elapsed_ms)."""
        path = f"/api/v1/artifacts/{quote(str(artifact_id), safe='')}/investigate/"
        return self._json("POST", path, json={"fact": fact, "regex": regex} if regex else {"fact": fact})

    def investigations(self, artifact_id: str) -> list[JSON]:
        path = f"/api/v1/artifacts/{quote(str(artifact_id), safe='')}/investigations/"
        return list(self._pages(path, None, "investigations"))

    def replay_bundle(self, trace_id: Any) -> JSON:
        """Preserved inputs and configuration of one traced call (and what a purge made unavailable)."""
        return self._json("GET", f"/api/v1/traces/{trace_id}/replay/")

    def iter_audit(self, **filters: Any) -> Iterator[JSON]:
        yield from self._pages("/api/v1/audit/", filters, "entries")

    def audit(self, **filters: Any) -> list[JSON]:
        return list(self.iter_audit(**filters))

    def verify_audit(self) -> JSON:
        return self._json("GET", "/api/v1/audit/verify/")

    def get_retention(self) -> JSON:
        return self._json("GET", "/api/v1/retention/")

    def put_retention(self, policy: Mapping[str, Any]) -> JSON:
        return self._json("PUT", "/api/v1/retention/", json=dict(policy))

    def list_purges(self, **filters: Any) -> list[JSON]:
        return list(self._pages("/api/v1/purges/", filters, "purges"))

    def purge(self, workflow_id: str, **body: Any) -> JSON:
        """Purge source data; the answer says what was removed and which replays became impossible."""
        return self._json("POST", f"/api/v1/workflows/{_wf(workflow_id)}/purge/", json=_drop_none(body))

    # -- alerts and metrics ------------------------------------------------------------------------

    def list_alert_rules(self, **filters: Any) -> list[JSON]:
        return list(self._pages("/api/v1/alert-rules/", filters, "alert_rules"))

    def create_alert_rule(self, **rule: Any) -> JSON:
        return self._json("POST", "/api/v1/alert-rules/", json=_drop_none(rule))

    def get_alert_rule(self, rule_id: Any) -> JSON:
        return self._json("GET", f"/api/v1/alert-rules/{rule_id}/")

    def update_alert_rule(self, rule_id: Any, **changes: Any) -> JSON:
        return self._json("PATCH", f"/api/v1/alert-rules/{rule_id}/", json=changes)

    def delete_alert_rule(self, rule_id: Any) -> None:
        self._json("DELETE", f"/api/v1/alert-rules/{rule_id}/")

    def list_channels(self, **filters: Any) -> list[JSON]:
        return list(self._pages("/api/v1/channels/", filters, "channels"))

    def create_channel(self, **channel: Any) -> JSON:
        return self._json("POST", "/api/v1/channels/", json=_drop_none(channel))

    def get_channel(self, channel_id: Any) -> JSON:
        return self._json("GET", f"/api/v1/channels/{channel_id}/")

    def update_channel(self, channel_id: Any, **changes: Any) -> JSON:
        return self._json("PATCH", f"/api/v1/channels/{channel_id}/", json=changes)

    def delete_channel(self, channel_id: Any) -> None:
        self._json("DELETE", f"/api/v1/channels/{channel_id}/")

    def list_alerts(self, **filters: Any) -> list[JSON]:
        return list(self._pages("/api/v1/alerts/", filters, "alerts"))

    def metrics(self, **params: Any) -> JSON:
        return self._json("GET", "/api/v1/metrics/", params=params)

    def prometheus_metrics(self) -> str:
        """The Prometheus text exposition at ``/metrics``."""
        return self.request("GET", "/metrics").text
