"""Server-side OpenTelemetry: the OTLP/HTTP ingest (``POST /v1/traces``).

``decode`` reads and decodes a request body into spans (the one place a body is inflated and
parsed); ``ingest`` maps the spans onto workflows, events, consumer traces and observed
compactions. It needs Django and sits with the domain; ``memoryhub.integrations`` (the agent-side
code) does not import it.
"""

from memoryhub.otel.decode import SpanIn, decompress, encode_response, read_spans
from memoryhub.otel.ingest import IngestResult, ingest, ingest_status

__all__ = ["IngestResult", "SpanIn", "decompress", "encode_response", "ingest", "ingest_status", "read_spans"]
