"""What a framework or provider did to a workflow, told as its own (issue #31: honest opaque pages).

A workflow whose compactions a framework performs (Claude Code's ``/compact``, an OpenAI Agents
session compaction, a LangChain summarization step: ``memoryhub.memory.observed``) is compacted by
that framework's trigger, not by MemoryHub's policy; its pages say so, with the trigger it reported
(auto/manual and the tokens before the compaction). A version whose content the provider
encrypted (``memoryhub.core.opaque``) is *unknown*, never *lost*: its digest is shown once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryhub.core.opaque import is_opaque
from memoryhub.memory.observed import observed_compactions, threshold_in_force
from memoryhub.models import CompactionJob, Summary, Workflow
from memoryhub.models.workflows import WorkflowSource

OBSERVED_PREFIX = "observed/"
TRIGGER_LABELS = {
    "auto": "automatic",
    "manual": "manual",
    "threshold": "threshold",
    "unknown": "trigger not reported",
}


@dataclass(frozen=True)
class Trigger:
    kind: str  # auto | manual | threshold | unknown
    label: str
    pre_tokens: int | None  # the framework's own count of the context before it compacted
    post_tokens: int | None
    threshold_tokens: int | None
    detail: str


@dataclass(frozen=True)
class FrameworkCompaction:
    """Who compacts a workflow, when the compactions are a framework's (None otherwise)."""

    framework: str  # "Claude Code", "OpenAI Agents SDK", …
    compactor: str  # the compactor name the framework reported
    compactions: int
    last: Trigger
    threshold: dict[str, Any] | None  # memoryhub.memory.observed.threshold_in_force


def framework_name(workflow: Workflow, compactor: str = "") -> str:
    """The framework that feeds ``workflow`` (its source), or the compactor a REST client named."""
    if workflow.source != WorkflowSource.API:
        return str(WorkflowSource(workflow.source).label)
    return compactor or "an external framework"


def trigger_of(job: CompactionJob | None) -> Trigger | None:
    """The trigger an observed compaction job recorded, or None when ``job`` is MemoryHub's own."""
    if job is None or not job.idempotency_key.startswith(OBSERVED_PREFIX):
        return None
    raw = (job.attempts or [{}])[0].get("trigger") or {}
    kind = str(raw.get("kind") or "unknown")
    return Trigger(
        kind=kind,
        label=TRIGGER_LABELS.get(kind, kind),
        pre_tokens=raw.get("pre_tokens"),
        post_tokens=raw.get("post_tokens"),
        threshold_tokens=raw.get("threshold_tokens"),
        detail=str(raw.get("detail") or ""),
    )


def framework_compaction(workflow: Workflow) -> FrameworkCompaction | None:
    """How the framework compacts ``workflow``, from the compactions it reported; None when
    MemoryHub compacts it (no observed compaction)."""
    jobs = observed_compactions(workflow)
    last = jobs.defer("summary__content").first()
    if last is None:
        return None
    return FrameworkCompaction(
        framework=framework_name(workflow, last.compactor),
        compactor=last.compactor,
        compactions=jobs.count(),  # every one reported (a list of the newest 200 stopped at 200)
        last=trigger_of(last) or Trigger("unknown", TRIGGER_LABELS["unknown"], None, None, None, ""),
        threshold=threshold_in_force(workflow),
    )


@dataclass(frozen=True)
class ObservedVersion:
    """A summary version a framework wrote: who, and with which trigger."""

    framework: str
    trigger: Trigger


def observed_version(summary: Summary) -> ObservedVersion | None:
    trigger = trigger_of(summary.job) if summary.job_id else None
    if trigger is None:
        return None
    return ObservedVersion(framework_name(summary.workflow, summary.compactor_name), trigger)


# The media type the Claude Code and OpenAI Agents integrations give a compaction that left no
# summary at all (memoryhub.integrations: ABSENT_SUMMARY; the delivery layer, so not imported here).
ABSENT_SUMMARY = "application/vnd.memoryhub.absent-summary"


@dataclass(frozen=True)
class Opaque:
    """Content MemoryHub cannot read: only its digest and size are known."""

    digest: str
    size_bytes: int | None
    media_type: str

    @property
    def absent(self) -> bool:
        """The framework compacted without writing any summary (nothing encrypted: nothing there)."""
        return self.media_type == ABSENT_SUMMARY


def opaque_of(content: Any) -> Opaque | None:
    if not is_opaque(content):
        return None
    return Opaque(
        str(content.get("digest", "")), content.get("size_bytes"), str(content.get("media_type") or "")
    )


def without_digest(detail: str, opaque: Opaque | None) -> str:
    """A check's detail with the digest (shown once, in the content section) left out."""
    if opaque is None or not opaque.digest or opaque.digest not in detail:
        return detail
    return "content is opaque (encrypted by the provider): it cannot be read, so this is unknown"
