"""Primitives with no model or service dependencies: canonical JSON and hashes, errors, token
counting, opaque content, redaction, actors, append-only guards, partitioning and database routing."""
