"""The compaction pipeline: durable, idempotent compaction jobs (request, run, retry, sweep) and the
worker helpers; their Celery tasks are delivery (:mod:`memoryhub.tasks.compaction`). The
compactors themselves are pure Python in :mod:`memoryhub.compaction`."""
