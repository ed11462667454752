"""The compactor interface, its registry and the errors the job pipeline reacts to."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from memoryhub.compaction.types import CompactionResult, PreviousSummary, SourceEvent


class CompactionError(Exception):
    """A compaction that cannot succeed as asked (the job fails; retrying will not help)."""


class CompactorUnavailable(CompactionError):
    """The compactor is unknown or not configured (e.g. no LLM endpoint set)."""


class TransientCompactorError(CompactionError):
    """A temporary failure (rate limit, 5xx, timeout, connection): retry with backoff."""


class NothingToCompact(CompactionError):
    """No event can be covered (e.g. the range starts with a tool call still awaiting its result)."""


class InvalidCompactionInput(CompactionError, ValueError):
    """Events that are not the gapless continuation of the previous summary's coverage."""


class Compactor(ABC):
    """Turns a previous summary plus the events after its watermark into a new candidate.

    The class attributes are the configuration recorded on every summary the compactor writes
    (metadata group 3 of a summary); instances may override ``model`` and ``token_budget``.
    """

    name: ClassVar[str]
    version: ClassVar[str]
    algorithm_version: ClassVar[str]
    prompt_template_version: ClassVar[str | None] = None
    tool_schema_version: ClassVar[str] = "facts-v1"
    # True when ``compact`` wants the events its previous summary covered too (from its
    # ``covers_from_seq``), not only those after the watermark.
    reads_history: ClassVar[bool] = False

    model: str
    token_budget: int | None
    encoding: str

    @abstractmethod
    def compact(self, previous: PreviousSummary | None, events: list[SourceEvent]) -> CompactionResult:
        """Build a candidate covering ``previous`` (if any) plus as many ``events`` as safe."""

    def config(self) -> dict[str, Any]:
        """The compactor configuration as stored on a summary."""
        return {
            "name": self.name,
            "version": self.version,
            "model": self.model,
            "prompt_template_version": self.prompt_template_version,
            "algorithm_version": self.algorithm_version,
            "token_budget": self.token_budget,
            "tool_schema_version": self.tool_schema_version,
        }


_REGISTRY: dict[str, type[Compactor]] = {}

C = TypeVar("C", bound=type[Compactor])


def register(cls: C) -> C:
    """Class decorator: make ``cls`` available to ``get_compactor(cls.name)``."""
    _REGISTRY[cls.name] = cls
    return cls


def available_compactors() -> list[str]:
    """Names of every registered compactor (configured or not)."""
    return sorted(_REGISTRY)


def get_compactor(name: str, **overrides: Any) -> Compactor:
    """An instance of compactor ``name`` built with ``overrides`` (e.g. ``token_budget``).

    Raises ``CompactorUnavailable`` for an unknown name or a compactor missing configuration.
    """
    factory: Callable[..., Compactor] | None = _REGISTRY.get(name)
    if factory is None:
        raise CompactorUnavailable(f"unknown compactor {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    try:
        return factory(**overrides)
    except TypeError as exc:  # an override the compactor does not accept
        raise CompactorUnavailable(f"compactor {name!r} cannot be configured: {exc}") from exc
