"""Shared bits for API views: tenant-scoped base view, workflow lookup, query-param parsing."""

from __future__ import annotations

from typing import Any

from rest_framework.views import APIView

from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from memoryhub.memory.workflows import get_workflow
from memoryhub.models import Tenant, Workflow
from memoryhub.web.actors import request_actor
from memoryhub.web.api.serializers import ErrorSerializer

# External ids may contain anything but '/'.
WF = "<str:wf>"


class TenantAPIView(APIView):
    """Base for v1 views: request.tenant/request.role are set by the TenantMember permission."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method in ("POST", "PUT", "PATCH"):
            # Parse (and so check: SafeJSONParser) every body, also one the view ignores: a NUL,
            # a surrogate or 10,000-deep nesting is a 400 even where no field is read.
            request.data  # noqa: B018

    @property
    def tenant(self) -> Tenant:
        """The tenant the TenantMember permission resolved for this request."""
        # TenantMember sets request.tenant at runtime; DRF's Request type does not declare it.
        tenant: Tenant = self.request.tenant  # type: ignore[attr-defined]
        return tenant

    def actor(self) -> Actor:
        return request_actor(self.request)

    def workflow(self, external_id: str, *, for_update: bool = False) -> Workflow:
        return get_workflow(self.tenant, external_id, for_update=for_update)


def list_responses(serializer) -> dict:
    """OpenAPI responses of a paginated list: 400 for a bad filter value, 404 for a page past the end."""

    return {200: serializer(many=True), 400: ErrorSerializer, 404: ErrorSerializer}


def int_param(
    params: Any, name: str, default: int | None = None, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"query parameter {name!r} must be an integer, got {raw!r}", code="invalid_parameter"
        )
    if value < minimum or (maximum is not None and value > maximum):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise InvalidInput(
            f"query parameter {name!r} must be at least {minimum}{bound}", code="invalid_parameter"
        )
    return value


_TRUE, _FALSE = frozenset({"true", "1", "yes"}), frozenset({"false", "0", "no"})


def bool_param(params: Any, name: str, default: bool) -> bool:
    """A boolean query parameter (true/false, 1/0, yes/no); anything else is a 400."""
    raw = params.get(name)
    if raw in (None, ""):
        return default
    value = str(raw).strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise InvalidInput(
        f"query parameter {name!r} must be true or false, got {raw!r}", code="invalid_parameter"
    )


def body_object(request) -> dict[str, Any]:
    """request.data as a dict, or a clear 400 (a list or scalar body is not an object)."""
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    return data
