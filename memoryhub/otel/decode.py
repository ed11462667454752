"""The OTLP/HTTP door: the one place a ``POST /v1/traces`` body is read, inflated and decoded.

``read_spans(body, content_type, content_encoding)`` → the request's spans (``SpanIn``) and how
many were malformed. Protobuf is parsed once and walked directly (no detour through a JSON-shaped
dict); OTLP/JSON (hex ids) is walked from the parsed JSON. ``encode_response`` answers in the
request's encoding.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memoryhub.core.errors import InvalidInput
from memoryhub.core.inflate import inflate

MAX_DECODED_BYTES = 64 * 1024 * 1024
PROTOBUF_TYPES = ("application/x-protobuf", "application/protobuf")


@dataclass(slots=True)
class SpanIn:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[dict[str, Any]]
    status: dict[str, Any] = field(default_factory=dict)


def _media_type(content_type: str) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def decompress(body: bytes, encoding: str) -> bytes:
    # Streamed, the limit on the inflated bytes (BodyDecodingMiddleware has normally done it already).
    return inflate(body, encoding, MAX_DECODED_BYTES)


def read_spans(
    body: bytes,
    content_type: str,
    content_encoding: str = "",
    check: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[SpanIn], int]:
    """The request body → (its spans, how many spans were malformed: no trace or span id).

    ``check`` sees a JSON request as decoded, before it is mapped (the door's shape and storability
    check: a wrong node type is a 400, not an error inside the mapping)."""
    ctype = _media_type(content_type)
    if ctype not in PROTOBUF_TYPES and ctype != "application/json":
        raise InvalidInput(
            f"Content-Type {content_type!r}: use application/x-protobuf or application/json",
            code="unsupported_media_type",
            status=415,
        )
    raw = decompress(body, content_encoding)
    if ctype == "application/json":
        try:
            data = json.loads(raw or b"{}")
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"body is not JSON: {exc}", code="invalid_body") from exc
        if not isinstance(data, dict):
            raise InvalidInput("body must be an ExportTraceServiceRequest object", code="invalid_body")
        if check is not None:
            check(data)
        return json_spans(data)
    return protobuf_spans(raw)


def encode_response(partial: dict[str, Any] | None, content_type: str) -> tuple[bytes, str]:
    """ExportTraceServiceResponse in the request's encoding."""
    if _media_type(content_type) == "application/json":
        return json.dumps({"partialSuccess": partial} if partial else {}).encode(), "application/json"
    # The memoryhub[otel] extra: read_spans has already needed it for a protobuf request.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if partial:
        response.partial_success.rejected_spans = int(partial.get("rejectedSpans", 0))
        response.partial_success.error_message = partial.get("errorMessage", "")
    return response.SerializeToString(), "application/x-protobuf"


# -- protobuf ------------------------------------------------------------------------------------


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _pb_attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None


def _pb_attributes(items: Any) -> dict[str, Any]:
    return {item.key: _pb_value(item.value) for item in items}


def protobuf_spans(body: bytes) -> tuple[list[SpanIn], int]:
    try:
        # The memoryhub[otel] extra (protobuf messages), imported when a protobuf body arrives.
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as exc:
        raise InvalidInput(
            "protobuf OTLP needs the optional extra memoryhub[otel] on the server; send JSON instead",
            code="protobuf_unavailable",
            status=415,
        ) from exc
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise InvalidInput(
            f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}", code="invalid_body"
        ) from exc
    spans: list[SpanIn] = []
    malformed = 0
    for rs in message.resource_spans:
        resource = _pb_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for raw in ss.spans:
                if len(raw.trace_id) != 16 or len(raw.span_id) != 8:
                    malformed += 1
                    continue
                spans.append(
                    SpanIn(
                        trace_id=raw.trace_id.hex(),
                        span_id=raw.span_id.hex(),
                        parent_span_id=raw.parent_span_id.hex()[:16],
                        name=raw.name[:200],
                        start=raw.start_time_unix_nano,
                        end=raw.end_time_unix_nano,
                        attrs=_pb_attributes(raw.attributes),
                        resource=resource,
                        events=[
                            {
                                "name": e.name,
                                "time": e.time_unix_nano,
                                "attributes": _pb_attributes(e.attributes),
                            }
                            for e in raw.events
                        ],
                        status={"code": raw.status.code, "message": raw.status.message}
                        if raw.HasField("status")
                        else {},
                    )
                )
    return spans, malformed


# -- OTLP/JSON -----------------------------------------------------------------------------------


def any_value(value: Any) -> Any:
    """OTLP AnyValue (JSON shape) → a plain JSON value."""
    if not isinstance(value, dict):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "doubleValue" in value:
        return value["doubleValue"]
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = any_value(item.get("value"))
    return out


def _hex_id(value: Any, size: int) -> str:
    """OTLP/JSON ids are hex strings; an id of the wrong length or alphabet is no id."""
    if not isinstance(value, str) or len(value) != size * 2:
        return ""
    try:
        bytes.fromhex(value)
    except (ValueError, binascii.Error):
        return ""
    return value.lower()


def _nanos(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def json_spans(request: dict[str, Any]) -> tuple[list[SpanIn], int]:
    spans: list[SpanIn] = []
    malformed = 0
    for rs in request.get("resourceSpans") or []:
        if not isinstance(rs, dict):
            continue
        resource = attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            if not isinstance(ss, dict):
                continue
            for raw in ss.get("spans") or []:
                if not isinstance(raw, dict):
                    malformed += 1
                    continue
                trace_id, span_id = _hex_id(raw.get("traceId"), 16), _hex_id(raw.get("spanId"), 8)
                if not trace_id or not span_id:
                    malformed += 1
                    continue
                status = raw.get("status")
                spans.append(
                    SpanIn(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=_hex_id(raw.get("parentSpanId"), 8),
                        name=str(raw.get("name") or "")[:200],
                        start=_nanos(raw.get("startTimeUnixNano")),
                        end=_nanos(raw.get("endTimeUnixNano")),
                        attrs=attributes(raw.get("attributes")),
                        resource=resource,
                        events=[
                            {
                                "name": str(e.get("name") or ""),
                                "time": _nanos(e.get("timeUnixNano")),
                                "attributes": attributes(e.get("attributes")),
                            }
                            for e in raw.get("events") or []
                            if isinstance(e, dict)
                        ],
                        status=status if isinstance(status, dict) else {},
                    )
                )
    return spans, malformed
