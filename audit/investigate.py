"""Investigations: why did an artifact miss a fact? (seed: "How do you audit an unexpected output?")

For each consumer trace behind the artifact the reconstruction asks, in order:

1. Was it in what the consumer was given (its summary or its tail)? yes → downstream_reasoning_failure
2. Is the fact in any source event committed before the read?     no  → source_extraction_failure
3. Was it available but not handed over — in events after the tail the consumer got (up to head
   at read), or in the summary that was active at read time when the consumer read another one?
                                                                     yes → assembly_failure
4. Otherwise it sat only in events the consumed summary covers, and the summary lacks it
                                                                         → compaction_omission

An artifact produced by several calls gets the most downstream verdict among them (if any call
had the fact in its context, the miss happened after memory did its job). Evidence stores seqs,
flags and hashes — never event text — so a later purge does not leave copies behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from audit.content import content_is_opaque, iter_strings, purged_runs, range_label, runs, summary_content
from audit.lineage import producing_traces
from audit.log import record
from audit.models import Investigation, Verdict
from memoryhub.context.assembly import parse_context_id
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import hash_text
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory.search import SearchTooExpensive, candidate_seqs
from memoryhub.models import (
    Artifact,
    ConsumerTrace,
    Event,
    LifecycleEvent,
    LifecycleResult,
    Summary,
    SummaryStatus,
    Workflow,
)

MAX_FACT_CHARS = 500
MAX_LISTED = 50  # matches listed per kind of evidence (the counts are always exact)
SUMMARY_HISTORY = 50  # earlier versions checked for "which summary still had it"
# Most downstream first: the order in which several traces' verdicts are ranked.
RANK = [
    Verdict.DOWNSTREAM_REASONING_FAILURE,
    Verdict.ASSEMBLY_FAILURE,
    Verdict.COMPACTION_OMISSION,
    Verdict.SOURCE_EXTRACTION_FAILURE,
]

Matcher = Callable[[str], bool]


def _normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class FactMatcher:
    """Case-insensitive matcher: whitespace-insensitive substring, or a compiled regex.

    Regexes run on RE2 (google-re2): linear time in the text, whatever the pattern, so no
    pattern can make a match backtrack for ever; constructs that need backtracking
    (backreferences, lookaround) are refused with a 400. A regex investigation also has a time
    budget (``MEMORYHUB_REGEX_SEARCH_SECONDS``) for the whole event search, database
    prefilter included: past it the answer is a 400 asking for a narrower pattern.
    It keeps the original phrase so the event search can ask the database index for candidates.
    """

    fact: str
    regex: bool
    pattern: Any = None  # re2._Regexp
    deadline: float | None = None  # time.monotonic() after which a regex search gives up

    def __call__(self, text: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(text) is not None
        return _normalise(self.fact) in _normalise(text)

    def remaining(self) -> float | None:
        """Seconds left of the search budget (None: unbounded); raises once it is spent."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _too_expensive()
        return left


def _too_expensive() -> InvalidInput:
    budget = getattr(settings, "MEMORYHUB_REGEX_SEARCH_SECONDS", 1.0)
    return InvalidInput(
        f"the regular expression could not be searched within {budget:g} s; use a narrower pattern "
        "(a literal word in it lets the index find candidates)",
        code="regex_too_expensive",
    )


def compile_regex(fact: str) -> Any:
    """RE2, case-insensitive; a pattern RE2 cannot run in linear time is a 400."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    options.max_mem = 8 << 20  # bounds the compiled program (huge counted repetitions)
    try:
        return re2.compile(fact, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise InvalidInput(
            f"invalid regular expression (RE2 syntax: no backreferences or lookaround): {reason}",
            code="invalid_regex",
        )


def make_matcher(fact: str, *, regex: bool = False) -> FactMatcher:
    """A matcher for ``fact``; a bad fact or regex is a 400."""
    if not isinstance(fact, str) or not fact.strip():
        raise InvalidInput("fact must be a non-empty string", code="invalid_fact")
    if len(fact) > MAX_FACT_CHARS:
        raise InvalidInput(f"fact must be at most {MAX_FACT_CHARS} characters", code="invalid_fact")
    if regex:
        budget = float(getattr(settings, "MEMORYHUB_REGEX_SEARCH_SECONDS", 1.0))
        return FactMatcher(fact, True, compile_regex(fact), time.monotonic() + budget)
    return FactMatcher(fact, False)


@dataclass
class SourceHits:
    seqs: list[int]
    matches: list[dict[str, Any]]


def search_events(workflow: Workflow, match: Matcher, from_seq: int, to_seq: int | None = None) -> SourceHits:
    """Seqs of (unpurged) events in [from_seq, to_seq] whose content, facts or refs match."""
    qs = Event.objects.filter(workflow=workflow, seq__gte=from_seq, purged_at__isnull=True)
    if to_seq is not None:
        qs = qs.filter(seq__lte=to_seq)
    bounded = isinstance(match, FactMatcher) and match.deadline is not None
    if isinstance(match, FactMatcher):
        # PostgreSQL: the trigram index narrows a million-event history to the candidate rows.
        try:
            candidates = candidate_seqs(
                workflow.pk,
                match.fact,
                regex=match.regex,
                from_seq=from_seq,
                to_seq=to_seq,
                timeout=match.remaining(),
            )
        except SearchTooExpensive:
            raise _too_expensive()
        if candidates is not None:
            qs = qs.filter(seq__in=candidates)
    seqs: list[int] = []
    matches: list[dict[str, Any]] = []
    rows = qs.order_by("seq").values_list("seq", "kind", "agent", "content", "facts", "refs")
    for n, (seq, kind, agent, content, facts, refs) in enumerate(rows.iterator(chunk_size=2000)):
        if bounded and n % 500 == 0:
            match.remaining()  # type: ignore[attr-defined]  # raises once the budget is spent
        fields = [
            path
            for path, text in iter_strings({"content": content, "facts": facts, "refs": refs})
            if match(text)
        ]
        if fields:
            seqs.append(seq)
            if len(matches) < MAX_LISTED:
                matches.append({"seq": seq, "kind": kind, "agent": agent, "fields": fields[:5]})
    return SourceHits(seqs, matches)


def summary_fields(summary: Summary | None, match: Matcher) -> list[str] | None:
    """Paths inside the summary content that match (None when the content is unavailable)."""
    if summary is None:
        return []
    content = summary_content(summary)
    if content is None:
        return None
    return [path for path, text in iter_strings(content) if match(text)]


def active_summary_at(workflow: Workflow, when) -> Summary | None:
    """Which summary the workflow's pointer named at ``when``, replayed from applied lifecycle events."""
    pointer: Summary | None = None
    rows = (
        LifecycleEvent.objects.filter(workflow=workflow, result=LifecycleResult.APPLIED, at__lte=when)
        .exclude(to_status="", from_status="")
        .select_related("summary", "summary__purged_by")
        .order_by("at", "id")
    )
    for e in rows:
        if e.to_status == SummaryStatus.ACTIVE:
            pointer = e.summary
        elif e.from_status == SummaryStatus.ACTIVE and pointer is not None and e.summary_id == pointer.pk:
            pointer = None
    return pointer


def served_at_read(trace: ConsumerTrace) -> tuple[Summary | None, str]:
    """The summary the server served for this read: from the signed context id when the consumer
    quoted one of ours, else replayed from the lifecycle history at the trace's time."""

    coords = None
    if trace.context_id:
        try:
            coords = parse_context_id(trace.context_id)
        except InvalidInput:  # forged or altered: fall back to the recorded history
            coords = None
    if coords is not None and coords.workflow_pk == trace.workflow_id:
        if coords.summary_pk is None:
            return None, "context_id"
        served = Summary.objects.select_related("purged_by").filter(pk=coords.summary_pk).first()
        return served, "context_id"
    return active_summary_at(trace.workflow, trace.at), "lifecycle"


def _brief(summary: Summary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {
        "summary_id": summary.summary_id,
        "version": summary.version,
        "label": summary.label,
        "covers_from_seq": summary.covers_from_seq,
        "covers_to_seq": summary.covers_to_seq,
        "content_hash": summary.content_hash,
        "status": summary.status,
    }


def _quote(fact: str, regex: bool) -> str:
    return f"/{fact}/" if regex else f"“{fact}”"


def investigate_trace(trace: ConsumerTrace, match: Matcher, fact: str, regex: bool) -> dict[str, Any]:
    """Reconstruct one consumer's context and classify the miss (see the module docstring)."""
    workflow = trace.workflow
    summary = trace.summary
    watermark = summary.covers_to_seq if summary is not None else trace.summary_watermark
    head = max(trace.head_seq_at_read, trace.tail_to_seq)
    hits = search_events(workflow, match, 1, head)
    later = search_events(workflow, match, head + 1)
    fields = summary_fields(summary, match)
    in_summary = bool(fields)
    tail_seqs = [s for s in hits.seqs if watermark < s <= trace.tail_to_seq]
    missing_tail = [s for s in hits.seqs if max(watermark, trace.tail_to_seq) < s <= head]
    covered = [
        s for s in hits.seqs if summary is not None and summary.covers_from_seq <= s <= summary.covers_to_seq
    ]
    served, basis = served_at_read(trace)
    served_differs = (served.pk if served else None) != (summary.pk if summary else None)
    served_fields = summary_fields(served, match) if served is not None and served_differs else None
    served_watermark = served.covers_to_seq if served is not None else 0
    # What the server would have handed over at read time: the served summary + every later event to head.
    served_contains = bool(served_fields) or any(served_watermark < s <= head for s in hits.seqs)
    q = _quote(fact, regex)
    label = summary.label if summary is not None else "no summary"
    tail_label = range_label(watermark + 1, trace.tail_to_seq) if trace.tail_to_seq > watermark else "no tail"
    if in_summary or tail_seqs:
        verdict = Verdict.DOWNSTREAM_REASONING_FAILURE
        where = [f"{label} ({', '.join((fields or [])[:3])})"] if in_summary else []
        where += [f"consumed tail ({range_label(tail_seqs[0], tail_seqs[-1])})"] if tail_seqs else []
        explanation = f"{q} was in the context the consumer read: {' and '.join(where)}."
    elif not hits.seqs:
        verdict = Verdict.SOURCE_EXTRACTION_FAILURE
        explanation = (
            f"{q} is in none of events 1–{head} committed before the read: it never reached the record."
        )
    elif missing_tail or (served_differs and served_contains):
        verdict = Verdict.ASSEMBLY_FAILURE
        if missing_tail:
            explanation = (
                f"{q} is in event(s) {', '.join(map(str, missing_tail[:5]))}, committed before the read "
                f"(head {head}), but the consumer's tail stopped at {trace.tail_to_seq}."
            )
        else:
            given = f"{served.label} + events {served_watermark + 1}–{head}" if served else f"events 1–{head}"
            explanation = (
                f"{q} was in the context served at read time ({given}), but the consumer read {label}"
                f" + {tail_label} instead."
            )
    else:
        verdict = Verdict.COMPACTION_OMISSION
        seqs = ", ".join(map(str, hits.seqs[:5]))
        cover = f"{summary.covers_from_seq}–{summary.covers_to_seq}" if summary is not None else "—"
        explanation = (
            f"{q} is in source event(s) {seqs}, covered by {label} ({cover}), but {label}'s content "
            f"lacks it and the consumed tail ({tail_label}) does not contain it: the compactor dropped it."
        )
        if fields is None and summary is not None and content_is_opaque(summary):
            explanation += (
                f" ({label} is an observed compaction with opaque content (digest only): it may hold the "
                "fact in a form MemoryHub cannot read.)"
            )
        elif fields is None:
            explanation += f" ({label}'s content is unavailable: purged.)"
    unsearchable = purged_runs(workflow, 1, head)
    if unsearchable and verdict == Verdict.SOURCE_EXTRACTION_FAILURE:
        explanation += " Purged events could not be searched: " + "; ".join(
            f"{r['label']} ({r['note']})" for r in unsearchable[:5]
        )
    return {
        "verdict": verdict.value,
        "explanation": explanation,
        "trace": {
            "trace_id": trace.pk,
            "agent": trace.agent,
            "agent_run_id": trace.agent_run_id,
            "model_call_id": trace.model_call_id,
            "at": trace.at.isoformat(),
        },
        "source_seqs": hits.seqs[:MAX_LISTED],
        "source_match_count": len(hits.seqs),
        "source_matches": hits.matches,
        "source_ranges": [list(r) for r in runs(hits.seqs)][:MAX_LISTED],
        "later_source_seqs": later.seqs[:MAX_LISTED],
        "covered_seqs": covered[:MAX_LISTED],
        "in_summary": in_summary,
        "summary_available": fields is not None,
        "summary_fields": (fields or [])[:20],
        "in_tail": bool(tail_seqs),
        "tail_seqs": tail_seqs[:MAX_LISTED],
        "missing_tail_seqs": missing_tail[:MAX_LISTED],
        "served_at_read": {
            "summary": _brief(served),
            "basis": basis,
            "differs": served_differs,
            "contains_fact": served_contains if served_differs else in_summary or bool(tail_seqs),
        },
        "manifest": {
            "summary": _brief(summary),
            "summary_status_at_read": trace.summary_status_at_read,
            "watermark": watermark,
            "tail_from_seq": watermark + 1,
            "tail_to_seq": trace.tail_to_seq,
            "head_seq_at_read": trace.head_seq_at_read,
            "context_id": trace.context_id,
            "manifest_hash": trace.manifest_hash,
        },
        "unsearchable": [
            {"from_seq": r["from_seq"], "to_seq": r["to_seq"], "text": r["text"]} for r in unsearchable
        ],
    }


def summary_history(workflow: Workflow, match: Matcher, until) -> list[dict[str, Any]]:
    """Which versions (created up to ``until``) carried the fact — e.g. S1 yes, S2 and S3 no."""
    rows = (
        Summary.objects.filter(workflow=workflow, created_at__lte=until)
        .select_related("purged_by")
        .order_by("-version")[:SUMMARY_HISTORY]
    )
    out = []
    for s in sorted(rows, key=lambda s: s.version):
        fields = summary_fields(s, match)
        out.append({**(_brief(s) or {}), "contains_fact": bool(fields), "available": fields is not None})
    return out


# Versions that never served anyone cannot have lost a fact for a reader.
UNSERVED = (SummaryStatus.CANDIDATE, SummaryStatus.REJECTED)


def loss_start(
    history: list[dict[str, Any]], hit_seqs: list[int], consumed: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """(the version that started the loss running at ``consumed``, the later versions still missing it)."""
    if consumed is None:
        return None, []
    loss: dict[str, Any] | None = None
    still: list[str] = []
    for version in history:
        if version["version"] > consumed["version"]:
            break
        covers_hit = any(version["covers_from_seq"] <= s <= version["covers_to_seq"] for s in hit_seqs)
        if not covers_hit or not version.get("available", True) or version["status"] in UNSERVED:
            continue
        if version["contains_fact"]:
            loss, still = None, []
        elif loss is None:
            loss = version
        else:
            still.append(version["label"])
    return loss, still


def first_loss(
    history: list[dict[str, Any]], hit_seqs: list[int], consumed: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Which version first dropped the fact the consumed summary lacks.

    Walks the versions up to the consumed one in order; among those whose coverage includes a
    matching source event, a version that has the fact ends a loss, one that lacks it starts one
    (or continues it). The answer is the start of the loss still running at the consumed version,
    with the versions after it that still miss the fact, and that version's job, compactor and time.
    """
    loss, still = loss_start(history, hit_seqs, consumed)
    if loss is None:
        return None
    row = Summary.objects.select_related("job").get(summary_id=loss["summary_id"])
    previous = next(
        (v["label"] for v in reversed(history) if v["version"] < loss["version"] and v["contains_fact"]),
        None,
    )
    return {
        "summary": _brief(row),
        "job": row.job_id,
        "compactor": f"{row.compactor_name} {row.compactor_version}".strip(),
        "model": row.model,
        "at": row.created_at.isoformat(),
        "previous_with_fact": previous,
        "still_missing_in": still,
    }


def _loss_story(q: str, ev: dict[str, Any]) -> str:
    """The explanation of a compaction omission that names the first loss."""
    loss = ev["first_loss"]
    label = loss["summary"]["label"]
    job = f"job #{loss['job']}, " if loss["job"] else ""
    when = loss["at"][:19].replace("T", " ") + " UTC"
    seqs = ", ".join(map(str, ev["source_seqs"][:5]))
    text = f"{q} is in source event(s) {seqs}. It was first dropped by {label} ({job}compactor {loss['compactor']}, {when})"
    text += f"; {loss['previous_with_fact']} still had it." if loss["previous_with_fact"] else "."
    consumed = (ev.get("manifest") or {}).get("summary") or {}
    if loss["still_missing_in"]:
        text += f" It is still missing in {', '.join(loss['still_missing_in'])}"
        text += ", which the consumer read." if consumed.get("label") == loss["still_missing_in"][-1] else "."
    elif consumed.get("label") == label:
        text += f" The consumer read {label}."
    manifest = ev.get("manifest") or {}
    tail = (manifest.get("tail_from_seq"), manifest.get("tail_to_seq"))
    if tail[0] and tail[1] and tail[1] >= tail[0]:
        text += f" The consumed tail (events {tail[0]}–{tail[1]}) does not restore it."
    else:
        text += " There was no tail to restore it."
    return text


def reconstruct(artifact: Artifact, fact: str, *, regex: bool = False) -> tuple[str, dict[str, Any]]:
    """Verdict and evidence for ``fact`` missing from ``artifact`` (no writes)."""
    match = make_matcher(fact, regex=regex)
    traces = producing_traces(artifact)
    if not traces:
        hits = search_events(artifact.workflow, match, 1)
        if hits.seqs:
            raise Conflict(
                f"artifact {artifact.artifact_id} has no consumer trace, so the context it was built from "
                f"cannot be reconstructed (the fact is in source events {hits.seqs[:5]})",
                code="no_consumer_trace",
            )
        evidence = {
            "verdict": Verdict.SOURCE_EXTRACTION_FAILURE.value,
            "source_seqs": [],
            "in_summary": False,
            "in_tail": False,
            "manifest": None,
            "trace": None,
            "summaries": [],
            "explanation": f"{_quote(fact, regex)} is in no source event of {artifact.workflow.external_id}.",
        }
        return Verdict.SOURCE_EXTRACTION_FAILURE.value, {"fact": fact, "regex": regex, **evidence}
    per_trace = [investigate_trace(t, match, fact, regex) for t in traces]
    # Most downstream verdict wins; among equals, the latest call.
    primary_index = min(
        range(len(per_trace)), key=lambda i: (RANK.index(Verdict(per_trace[i]["verdict"])), -i)
    )
    primary = per_trace[primary_index]
    history = summary_history(artifact.workflow, match, traces[primary_index].at)
    loss = None
    if primary["verdict"] == Verdict.COMPACTION_OMISSION.value:
        loss = first_loss(history, primary["source_seqs"], (primary.get("manifest") or {}).get("summary"))
    if loss is not None:
        primary = {**primary, "first_loss": loss, "restored_by_tail": primary["in_tail"]}
        primary["explanation"] = _loss_story(_quote(fact, regex), primary)
    evidence = {
        "fact": fact,
        "regex": regex,
        **primary,
        "summaries": history,
        "other_traces": [
            {
                "trace_id": p["trace"]["trace_id"],
                "model_call_id": p["trace"]["model_call_id"],
                "verdict": p["verdict"],
            }
            for i, p in enumerate(per_trace)
            if i != primary_index
        ],
    }
    return primary["verdict"], evidence


def investigate(artifact: Artifact, fact: str, actor: Actor, *, regex: bool = False) -> Investigation:
    """Reconstruct, classify and save an investigation (with its audit entry, in one transaction)."""

    started = time.perf_counter()
    verdict, evidence = reconstruct(artifact, fact, regex=regex)
    elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
    with transaction.atomic():
        investigation = Investigation.objects.create(
            tenant=artifact.tenant,
            artifact=artifact,
            fact=fact,
            is_regex=regex,
            verdict=verdict,
            evidence=evidence,
            elapsed_ms=elapsed_ms,
            actor=str(actor),
        )
        record(
            artifact.tenant,
            actor,
            "artifact.investigate",
            artifact,
            {
                "investigation": investigation.pk,
                # A hash, not the text: the phrase may be personal data a later purge must erase,
                # and audit entries are immutable.
                "fact_sha256": hash_text(fact),
                "regex": regex,
                "verdict": verdict,
                "elapsed_ms": elapsed_ms,
            },
        )
    return investigation


def investigations_of(artifact: Artifact) -> QuerySet[Investigation]:
    """The investigations run on ``artifact``, newest first."""
    return (
        Investigation.objects.filter(tenant_id=artifact.tenant_id, artifact=artifact)
        .select_related("artifact")
        .order_by("-at", "-id")
    )
