"""The compaction pipeline: durable, idempotent compaction jobs (request, run, retry, sweep), their
Celery tasks and the worker helpers. The compactors themselves are pure Python in
:mod:`memoryhub.compaction`."""
