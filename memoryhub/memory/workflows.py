"""Workflow creation and lookup."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from audit.log import record
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.core.tokens import encoding_for_model, known_encoding
from memoryhub.models import Tenant, Workflow, WorkflowSource


def get_workflow(tenant: Tenant, external_id: str, *, for_update: bool = False) -> Workflow:
    """The tenant's workflow, or a 404 — another tenant's workflow is indistinguishable from none."""
    qs = Workflow.objects.filter(tenant=tenant, external_id=external_id)
    if for_update:
        qs = qs.select_for_update()
    workflow = qs.select_related("active_summary").first()
    if workflow is None:
        raise NotFound(f"workflow {external_id!r} not found", code="workflow_not_found")
    return workflow


def create_workflow(
    tenant: Tenant,
    external_id: str,
    *,
    name: str = "",
    graph_release: str = "",
    model: str = "",
    encoding: str = "",
    source: str = WorkflowSource.API,
    actor: Actor,
) -> tuple[Workflow, bool]:
    """Create a workflow; idempotent on external_id (returns (workflow, created))."""

    external_id = (external_id or "").strip()
    if not external_id or "/" in external_id or len(external_id) > 200:
        raise InvalidInput("external_id is required: 1-200 characters, no '/'", code="invalid_external_id")
    if encoding and not known_encoding(encoding):
        raise InvalidInput(f"unknown token encoding {encoding!r}", code="invalid_encoding")
    existing = Workflow.objects.filter(tenant=tenant, external_id=external_id).first()
    if existing:
        return existing, False
    try:
        with transaction.atomic():
            workflow = Workflow.objects.create(
                tenant=tenant,
                external_id=external_id,
                name=name or external_id,
                graph_release=graph_release,
                model=model,
                encoding=encoding or (encoding_for_model(model) if model else ""),
                source=source,
            )
            record(
                tenant,
                actor,
                "workflow.create",
                workflow,
                {"external_id": external_id, "name": workflow.name},
            )
    except IntegrityError:  # a concurrent create won the race: same answer as a repeat call
        return Workflow.objects.get(tenant=tenant, external_id=external_id), False
    return workflow, True


def workflow_encoding(workflow: Workflow) -> str:
    if workflow.encoding:
        return workflow.encoding
    return encoding_for_model(workflow.model) if workflow.model else encoding_for_model("")
