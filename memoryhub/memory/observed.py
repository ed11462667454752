"""Observed compactions: a compaction a framework or provider performed outside MemoryHub.

Claude Code's ``/compact``, an Anthropic ``compaction`` block, an OpenAI Agents session
compaction, a LangChain summarization step or an OTel span marked
``gen_ai.conversation.compacted`` all replace the first part of a conversation with a summary
MemoryHub did not write. ``record_observed_compaction`` makes each one a summary version like any
other:

- the eight metadata groups: compactor = the provider/model and its settings; watermark
  (``covers_to_seq``) = the last event the compaction replaced; coverage always starts at 1
  (a provider re-summarises everything before the boundary, its own earlier summary included);
- the same validation (``lifecycle.validate``): readable text is stored as
  ``{"narrative": text, "facts": [], "open_items": []}`` and checked by the text validator;
  unreadable content is stored as an ``opaque`` stub (digest and size, ``memoryhub.core.opaque``) and
  its validation reports ``unverifiable content``;
- the same compare-and-swap activation (``lifecycle.activate``) at the revision read just before:
  a concurrent activation makes it ``stale``, an older watermark ``refused``; both are recorded;
- a ``CompactionJob`` row (status SUCCEEDED, idempotency key ``observed/<tenant>/<wf>/<id>``)
  carries the trigger (manual/auto, ``pre_tokens``, the threshold if known) and the provider's
  settings, so metrics, lineage and investigations treat it like a job MemoryHub ran.

Idempotent by ``observation_id`` (the provider's id of the compaction: a transcript entry uuid,
a span id): recording it again returns the first result; the same id with other content is a 409.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.utils import timezone

from memoryhub.core.actors import Actor
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.core.checks import waivable
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.core.opaque import opaque_content
from memoryhub.memory import acceptance, lifecycle, repair
from memoryhub.memory.summaries import COMPACTOR_FIELDS, create_summary, max_summary_bytes
from memoryhub.models import CompactionJob, JobStatus, Summary, SummaryStatus, ValidationRecord, Workflow

COMPACTOR_EXTRA = frozenset({"settings", "provider"})
TRIGGER_KINDS = frozenset({"auto", "manual", "threshold", "unknown"})
TRIGGER_FIELDS = frozenset({"kind", "pre_tokens", "post_tokens", "threshold_tokens", "detail", "at"})
_ID = re.compile(r"^[\w.:@\-]{1,200}$")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObservedResult:
    """What happened to one observed compaction (``created`` is False for a repeat)."""

    summary: Summary
    job: CompactionJob
    created: bool
    validation: str  # passed | failed | unverifiable
    activation: (
        str  # activated | stale | refused:<code> | not_validated | blocked | (repeat: the first outcome)
    )
    # The hand-back (memoryhub.memory.repair.Handback.to_dict): None on a list row (its stored meta
    # is shown instead, without event text).
    repair: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        s, job = self.summary, self.job
        attempt = (job.attempts or [{}])[0]
        return {
            "summary_id": s.summary_id,
            "version": s.version,
            "label": s.label,
            "status": s.status,
            "covers_from_seq": s.covers_from_seq,
            "covers_to_seq": s.covers_to_seq,
            "content_hash": s.content_hash,
            "content_schema": s.content_schema,
            "token_count": s.token_count,
            "job_id": job.pk,
            "observation_id": attempt.get("observation_id"),
            "trigger": attempt.get("trigger", {}),
            "compactor_settings": attempt.get("compactor_settings", {}),
            "validation": self.validation,
            "activation": self.activation,
            "created": self.created,
            "repair": self.repair if self.repair is not None else attempt.get("repair"),
        }


def _bad(field: str, message: str, code: str = "invalid_observed_compaction") -> InvalidInput:
    return InvalidInput(f"{field}: {message}", code=code, field=field)


def _nonneg(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(field, f"must be a non-negative integer, got {value!r}")
    return value


def parse_trigger(trigger: Any) -> dict[str, Any]:
    """``{"kind": auto|manual|threshold|unknown, "pre_tokens"?, "post_tokens"?, "threshold_tokens"?, "detail"?}``."""
    if trigger is None:
        return {"kind": "unknown"}
    if not isinstance(trigger, dict):
        raise _bad("trigger", "must be an object")
    unknown = sorted(set(trigger) - TRIGGER_FIELDS)
    if unknown:
        raise _bad("trigger", f"unknown field(s) {unknown}; allowed: {sorted(TRIGGER_FIELDS)}")
    kind = trigger.get("kind") or "unknown"
    if kind not in TRIGGER_KINDS:
        raise _bad("trigger.kind", f"must be one of {sorted(TRIGGER_KINDS)}, got {kind!r}")
    out: dict[str, Any] = {"kind": kind}
    for key in ("pre_tokens", "post_tokens", "threshold_tokens"):
        value = _nonneg(trigger.get(key), f"trigger.{key}")
        if value is not None:
            out[key] = value
    for key in ("detail", "at"):
        value = trigger.get(key)
        if value is not None:
            if not isinstance(value, str) or len(value) > 500:
                raise _bad(f"trigger.{key}", "must be a string of at most 500 characters")
            out[key] = value
    return out


def parse_compactor(compactor: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(compactor fields for the Summary, provider settings kept beside it)."""
    if not isinstance(compactor, dict):
        raise _bad(
            "compactor", "an object with at least a 'name' (the provider) is required", "invalid_compactor"
        )
    unknown = sorted(set(compactor) - set(COMPACTOR_FIELDS) - COMPACTOR_EXTRA)
    if unknown:
        allowed = sorted(set(COMPACTOR_FIELDS) | COMPACTOR_EXTRA)
        raise _bad("compactor", f"unknown field(s) {unknown}; allowed: {allowed}", "invalid_compactor")
    settings = compactor.get("settings") or {}
    if not isinstance(settings, dict):
        raise _bad("compactor.settings", "must be an object", "invalid_compactor")
    if len(canonical_bytes(settings)) > 16_384:
        raise _bad("compactor.settings", "at most 16 KiB of JSON", "invalid_compactor")
    fields = {k: v for k, v in compactor.items() if k in COMPACTOR_FIELDS}
    name = fields.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _bad(
            "compactor.name", "the provider's name (a non-empty string) is required", "invalid_compactor"
        )
    for key, value in fields.items():
        if key == "token_budget":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise _bad("compactor.token_budget", "must be a positive integer", "invalid_compactor")
        elif value is not None and not isinstance(value, str):
            raise _bad(f"compactor.{key}", "must be a string", "invalid_compactor")
    fields.setdefault("algorithm_version", "observed")
    return fields, settings


def _content(text: Any, opaque: Any) -> dict[str, Any]:
    if (text is None) == (opaque is None):
        raise _bad(
            "text", "exactly one of 'text' (readable summary) or 'opaque' ({digest, size_bytes}) is required"
        )
    if text is not None:
        # An empty summary is recorded, never refused: it is flagged (empty_summary) and the
        # tail it replaced is handed back (memoryhub.memory.repair).
        if not isinstance(text, str):
            raise _bad("text", "must be a string")
        return {"narrative": text, "facts": [], "open_items": []}
    if not isinstance(opaque, dict):
        raise _bad("opaque", "must be an object {digest: 'sha256:<hex>', size_bytes: n, media_type?}")
    extra = sorted(set(opaque) - {"digest", "size_bytes", "media_type"})
    if extra:
        raise _bad("opaque", f"unknown field(s) {extra}")
    return opaque_content(opaque.get("digest"), opaque.get("size_bytes"), opaque.get("media_type") or "")  # type: ignore[arg-type]  # raw input: check_opaque validates the stub


def _accept_as_observed(summary: Summary, record: ValidationRecord | None, actor: Actor) -> Summary:
    """The framework already replaced its history with this summary: MemoryHub cannot refuse
    what happened, only judge it. The failed checks stay on the record (they count as validation
    failures, the summary page and alerts show them); the observer waives them, saying so, so
    the active pointer shows what the model actually reads. A broken hash is never waived."""
    failed = lifecycle.failed_checks(record)
    if not waivable(failed):
        return summary
    return lifecycle.waive(
        summary,
        failed,
        actor,
        "observed compaction: the framework already reads this summary; its failed checks stay on the record",
    )


def _key(workflow: Workflow, observation_id: str) -> str:
    return f"observed/{workflow.tenant_id}/{workflow.pk}/{observation_id}"


def summary_for_observation(workflow: Workflow, observation_id: str) -> str | None:
    """The summary_id recorded for ``observation_id`` in ``workflow`` (None: not recorded)."""
    return (
        CompactionJob.objects.filter(idempotency_key=_key(workflow, observation_id), summary__isnull=False)
        .values_list("summary__summary_id", flat=True)
        .first()
    )


def _assess(summary: Summary, *, can_block: bool, gate: str | None = None) -> repair.Handback | None:
    """The hand-back for ``summary`` (None, logged, when assessing fails: recording never does)."""
    try:
        settings = repair.settings_for(summary.workflow)
        if gate is not None:
            settings["gate"] = gate
        return repair.assess(
            summary.workflow,
            json.loads(summary.content),
            summary.covers_from_seq,
            summary.covers_to_seq,
            can_block=can_block,
            settings=settings,
        )
    except Exception:
        logger.exception("repair assessment of %s failed; recorded without a hand-back", summary.summary_id)
        return None


def _repeat(job: CompactionJob, content_hash: str, covers_to_seq: int) -> ObservedResult:
    summary = Summary.objects.select_related("workflow").get(pk=cast(int, job.summary_id))
    if summary.content_hash != content_hash or summary.covers_to_seq != covers_to_seq:
        raise Conflict(
            f"observation {job.attempts[0].get('observation_id')!r} was already recorded as {summary.label} "
            f"(covers 1..{summary.covers_to_seq}, {summary.content_hash}) with different content or coverage",
            code="observation_conflict",
            summary_id=summary.summary_id,
        )
    # The validator's verdict on this observation, as the first call reported it (the observer's
    # waiver that may follow it never reads as a pass): a repeat answers the same.
    verdict = summary.validations.order_by("created_at", "id").first()
    stored = (job.attempts or [{}])[0].get("repair") or {}
    handback = (
        _assess(summary, can_block=stored.get("verdict") == "blocked", gate=stored.get("gate"))
        if stored
        else None
    )
    return ObservedResult(
        summary=summary,
        job=job,
        created=False,
        validation=verdict.result if verdict else "not_validated",
        activation=job.outcome or "pending",  # the first call is still validating/activating
        repair=handback.to_dict() if handback is not None else None,
    )


def record_observed_compaction(
    workflow: Workflow,
    *,
    covers_to_seq: int,
    text: str | None = None,
    opaque: dict[str, Any] | None = None,
    compactor: dict[str, Any],
    trigger: dict[str, Any] | None = None,
    observation_id: str | None = None,
    source_refs: list[str] | None = None,
    activate: bool = True,
    read_epoch: int | None = None,
    can_block: bool = False,
    actor: Actor,
) -> ObservedResult:
    """Store, validate and (by CAS) activate a compaction performed outside MemoryHub.

    ``covers_to_seq`` is the seq of the last event the compaction replaced (1..head). Exactly one
    of ``text`` (the provider's summary) or ``opaque`` (``{"digest": "sha256:<hex>", "size_bytes":
    n, "media_type"?}``) is given. ``compactor`` is ``{"name": provider, "model"?, "version"?,
    "token_budget"?, "settings"?: {...}}``; ``trigger`` is ``{"kind": auto|manual|threshold|unknown,
    "pre_tokens"?, "post_tokens"?, "threshold_tokens"?, "detail"?}``. ``observation_id`` (default:
    derived from coverage, content and compactor) makes a repeat return the first result.
    ``read_epoch``: for work that was held and is built later (a deferred OTLP compaction), the
    workflow's purge epoch when its stored input was read; a purge since then is a ``Conflict``
    (``purged_since_read``), checked under the workflow lock, and nothing is written.

    The answer carries ``repair`` (``memoryhub.memory.repair``): the verdict on what the summary
    lost and the items to hand back, by the workflow policy's gate. ``can_block``: the caller can
    keep the framework's previous context; under ``gate: block`` a lossy summary is then recorded
    and judged but not activated (activation ``blocked``).
    """
    if isinstance(covers_to_seq, bool) or not isinstance(covers_to_seq, int) or covers_to_seq < 1:
        raise _bad(
            "covers_to_seq", f"must be a positive integer (the last replaced event), got {covers_to_seq!r}"
        )
    content = _content(text, opaque)
    fields, settings = parse_compactor(compactor)
    trig = parse_trigger(trigger)
    data = canonical_bytes(content)
    content_hash = sha256_hex(data)
    if observation_id is None:
        observation_id = sha256_hex(canonical_bytes([covers_to_seq, content_hash, fields.get("name")]))[7:39]
    if not isinstance(observation_id, str) or not _ID.match(observation_id):
        raise _bad("observation_id", "1-200 characters: letters, digits, '_', '-', '.', ':', '@'")
    if len(data) > max_summary_bytes():
        text_hint = " (send 'opaque' with its digest and size instead)" if text is not None else ""
        raise _bad("text", f"{len(data)} bytes is over the maximum of {max_summary_bytes()}{text_hint}")
    key = _key(workflow, observation_id)
    existing = CompactionJob.objects.filter(idempotency_key=key).first()
    if existing is not None and existing.summary_id:
        return _repeat(existing, content_hash, covers_to_seq)

    now = timezone.now()
    attempt = {
        "task_id": f"observed:{observation_id}",
        "observation_id": observation_id,
        "started_at": now.isoformat(),
        "finished_at": now.isoformat(),
        "outcome": "observed",
        "error": "",
        "trigger": trig,
        "compactor_settings": settings,
    }
    try:
        with transaction.atomic():
            job = CompactionJob.objects.create(
                tenant_id=workflow.tenant_id,
                workflow=workflow,
                source_revision=covers_to_seq,
                compactor=str(fields["name"])[:100],
                idempotency_key=key,
                status=JobStatus.RUNNING,
                attempts=[attempt],
                requested_by=str(actor),
                tokens_in=trig.get("pre_tokens", 0),
                started_at=now,
            )
            summary = create_summary(
                workflow,
                content=content,
                covers_from_seq=1,
                covers_to_seq=covers_to_seq,
                compactor=fields,
                source_refs=[*(source_refs or []), f"observed:{observation_id}"],
                job=job,
                claimed_hash=content_hash,
                source_purge_epoch=read_epoch,
                actor=actor,
            )
            # Linked in the same transaction: a concurrent repeat that loses the key race finds it.
            CompactionJob.objects.filter(pk=job.pk).update(summary=summary)
    except IntegrityError:  # a concurrent identical observation won the race
        existing = CompactionJob.objects.filter(idempotency_key=key).first()
        if existing is None or not existing.summary_id:
            raise
        return _repeat(existing, content_hash, covers_to_seq)

    summary = lifecycle.validate(summary, actor)
    record = summary.validations.order_by("-created_at", "-id").first()
    validation = record.result if record else "not_validated"
    handback = _assess(summary, can_block=can_block)
    blocked = handback is not None and handback.verdict == "blocked"
    if blocked:  # the gate refuses it and the caller keeps its previous context: recorded, not read
        activate = False
    if activate and summary.status == SummaryStatus.REJECTED:
        summary = _accept_as_observed(summary, record, actor)
    outcome = "not_validated"
    if blocked:
        outcome = "blocked"
    elif activate and summary.status == SummaryStatus.VALIDATED:
        revision = Workflow.objects.filter(pk=workflow.pk).values_list("active_revision", flat=True).get()
        try:
            result = lifecycle.activate(
                summary, revision, actor, reason=f"observed compaction {observation_id}"
            )
            outcome = "activated" if result.applied else str(result.outcome)
        except Conflict as refused:  # recorded, like a stale attempt
            outcome = f"refused:{refused.code}"
    elif summary.status == SummaryStatus.REJECTED:
        outcome = "rejected"
    elif not activate:
        outcome = "recorded"
    summary.refresh_from_db()
    if handback is not None:
        attempt["repair"] = handback.meta()
    CompactionJob.objects.filter(pk=job.pk).update(
        attempts=[attempt],
        status=JobStatus.SUCCEEDED,
        summary=summary,
        outcome=outcome[:32],
        tokens_out=summary.token_count,
        finished_at=timezone.now(),
    )
    acceptance.refresh_summary_jobs(summary.pk)
    job.refresh_from_db()
    return ObservedResult(
        summary=summary,
        job=job,
        created=True,
        validation=validation,
        activation=outcome,
        repair=handback.to_dict() if handback is not None else None,
    )


def observed_compactions(workflow: Workflow):
    """A workflow's observed compactions, newest first (jobs whose key marks them observed)."""
    return (
        CompactionJob.objects.filter(workflow=workflow, idempotency_key__startswith="observed/")
        .select_related("summary")
        .order_by("-created_at", "-id")
    )


def threshold_in_force(workflow: Workflow) -> dict[str, Any] | None:
    """The compaction threshold a framework actually applied, reconstructed from what it reported.

    An explicit ``threshold_tokens`` wins; otherwise automatic compactions fired at (or just
    above) the threshold, so the lowest ``pre_tokens`` among them bounds it from above. None when
    nothing was observed.
    """
    autos: list[int] = []
    explicit: list[int] = []
    manual = 0
    for job in observed_compactions(workflow)[:200]:
        trig = (job.attempts or [{}])[0].get("trigger", {})
        if "threshold_tokens" in trig:
            explicit.append(trig["threshold_tokens"])
        if trig.get("kind") in ("auto", "threshold") and trig.get("pre_tokens"):
            autos.append(trig["pre_tokens"])
        elif trig.get("kind") == "manual":
            manual += 1
    if not (autos or explicit or manual):
        return None
    if explicit:
        return {
            "tokens": explicit[0],
            "basis": "reported by the framework",
            "samples": len(explicit),
            "manual": manual,
        }
    if autos:
        return {
            "tokens": min(autos),
            "basis": f"lowest pre-compaction token count of {len(autos)} automatic compaction(s)",
            "samples": len(autos),
            "max_pre_tokens": max(autos),
            "manual": manual,
        }
    return {
        "tokens": None,
        "basis": f"{manual} manual compaction(s) only: no automatic threshold seen",
        "samples": 0,
        "manual": manual,
    }
