"""MemoryHub: versioned, audited compacted memory for long-running multi-agent LLM workflows.

Kept import-free so ``memoryhub.client`` works without Django or Celery; the Celery app is
``memoryhub.celery:app`` (tasks import it explicitly).
"""
