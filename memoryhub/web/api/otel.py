"""OTLP/HTTP trace ingest: ``POST /v1/traces`` (protobuf or JSON), and its status.

Point an OpenTelemetry Collector's ``otlphttp`` exporter (or an SDK's OTLP/HTTP exporter) at the
MemoryHub base URL with ``Authorization: Bearer <api key>``; the exporter appends ``/v1/traces``.
Decoding: ``memoryhub.otel.decode``; mapping: ``memoryhub.otel.ingest``. The body may be
gzip/deflate-compressed.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.response import Response

from memoryhub.models import Role
from memoryhub.otel import encode_response, ingest, ingest_status, read_spans
from memoryhub.web.api.common import TenantAPIView
from memoryhub.web.api.otlp_shape import check_request, check_spans
from memoryhub.web.api.serializers import ErrorSerializer


class RawBody(BaseParser):
    """Accept any media type: the view reads request.body itself (protobuf or JSON, maybe compressed)."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


class OtlpTraces(TenantAPIView):
    parser_classes = [RawBody]
    write_role = Role.INGEST

    # OTLP/HTTP is the OpenTelemetry protocol, not part of the v1 REST API: not in /api/schema/
    # (documented in the README; tenant isolation and roles are tested in test_otel_ingest).
    @extend_schema(
        exclude=True,
        operation_id="otlp_traces_export",
        summary="OTLP/HTTP ExportTraceServiceRequest (application/x-protobuf or application/json)",
        request={"application/x-protobuf": bytes, "application/json": dict},
        responses={
            200: OpenApiResponse(
                description="ExportTraceServiceResponse (partialSuccess names unassigned spans)"
            ),
            400: ErrorSerializer,
            413: ErrorSerializer,
            415: ErrorSerializer,
        },
    )
    def post(self, request):
        content_type = request.META.get("CONTENT_TYPE", "")
        spans, malformed = read_spans(
            request.body, content_type, request.META.get("HTTP_CONTENT_ENCODING", ""), check=check_request
        )
        check_spans(spans)  # unstorable text, depth, wrong node types: a 400 before ingest
        result = ingest(request.tenant, spans, self.actor(), malformed=malformed)
        # 200 with partialSuccess even when conversations were rejected: the others are written,
        # and OTLP exporters must not retry what the response rejects.
        payload, media = encode_response(result.partial_success(), content_type)
        response = HttpResponse(payload, content_type=media, status=200)
        response["X-MemoryHub-Ingest"] = result.header()
        return response


class OtlpStatus(TenantAPIView):
    @extend_schema(responses={200: dict})
    def get(self, request):
        return Response(ingest_status(request.tenant))


urlpatterns = [path("otel/status/", OtlpStatus.as_view(), name="otel-status")]
otlp_patterns = [path("v1/traces", OtlpTraces.as_view(), name="otlp-traces")]
