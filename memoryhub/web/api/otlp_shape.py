"""The OTLP door's input check: what the decoded ExportTraceServiceRequest may hold, before the
ingest mapping reads it.

Two checks, both raising InvalidInput (a 400 JSON error, nothing written):

* every string, key and number is storable (``check_document``: no NUL, no lone surrogate, no
  integer past 64 bits, nesting under the parser's depth limit) — protobuf strings included;
* every node has the type the OTLP/JSON shape gives it (``"resource": "abc"``, a span that is a
  list, attributes that are not a list…); unknown fields are left alone (OTLP is additive).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memoryhub.core.errors import InvalidInput
from memoryhub.web.api.parsers import check_document

# OTLP/JSON shape: a dict spec lists the fields whose type is checked when present; [spec] is a
# list of that spec; a tuple of types is a leaf.
_TEXT = (str,)
_NUMBERISH = (str, int)
_ANY_VALUE: dict[str, Any] = {
    "stringValue": _TEXT,
    "boolValue": (bool,),
    "intValue": _NUMBERISH,
    "doubleValue": (int, float, str),
    "bytesValue": _TEXT,
}
_KEY_VALUE: dict[str, Any] = {"key": _TEXT, "value": _ANY_VALUE}
_ANY_VALUE["arrayValue"] = {"values": [_ANY_VALUE]}
_ANY_VALUE["kvlistValue"] = {"values": [_KEY_VALUE]}
_ATTRIBUTES = [_KEY_VALUE]
_SPAN = {
    "traceId": _TEXT,
    "spanId": _TEXT,
    "parentSpanId": _TEXT,
    "name": _TEXT,
    "kind": (int, str),
    "startTimeUnixNano": _NUMBERISH,
    "endTimeUnixNano": _NUMBERISH,
    "attributes": _ATTRIBUTES,
    "events": [{"name": _TEXT, "timeUnixNano": _NUMBERISH, "attributes": _ATTRIBUTES}],
    "links": [{"traceId": _TEXT, "spanId": _TEXT, "attributes": _ATTRIBUTES}],
    "status": {"code": (int, str), "message": _TEXT},
}
REQUEST = {
    "resourceSpans": [
        {
            "resource": {"attributes": _ATTRIBUTES},
            "scopeSpans": [
                {"scope": {"name": _TEXT, "version": _TEXT, "attributes": _ATTRIBUTES}, "spans": [_SPAN]}
            ],
        }
    ]
}
_NAMES = {dict: "an object", list: "a list"}


def check_request(data: Any) -> None:
    """Raise InvalidInput naming the first node that is unstorable or of the wrong type."""
    check_document(data)
    stack: list[tuple[Any, Any, str]] = [(data, REQUEST, "body")]
    while stack:
        value, spec, where = stack.pop()
        if value is None:
            continue  # proto3 JSON may write an absent field as null
        if isinstance(spec, dict):
            if spec is _SPAN and not isinstance(value, dict):
                continue  # a span that is not an object is rejected by the ingest (partial success)
            if not isinstance(value, dict):
                raise InvalidInput(f"{where} must be an object", code="invalid_otlp", field=where)
            stack += [(value[k], sub, f"{where}.{k}") for k, sub in spec.items() if k in value]
        elif isinstance(spec, list):
            if not isinstance(value, list):
                raise InvalidInput(f"{where} must be a list", code="invalid_otlp", field=where)
            stack += [(item, spec[0], f"{where}[{i}]") for i, item in enumerate(value)]
        elif not isinstance(value, spec) or (bool not in spec and isinstance(value, bool)):
            expected = " or ".join(t.__name__ for t in spec)
            raise InvalidInput(f"{where} must be {expected}", code="invalid_otlp", field=where)


def check_spans(spans: Iterable[Any]) -> None:
    """Decoded spans (protobuf included, whose strings no JSON parser saw) hold only storable
    text and numbers: a NUL in a protobuf string is a 400 here, not a database error later."""
    for span in spans:
        check_document(
            {"name": span.name, "attributes": span.attrs, "resource": span.resource, "events": span.events}
        )
