"""Who did something: a user, an API key, a worker task attempt, or the system (beat sweeps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    kind: str  # user | api_key | worker | system
    name: str
    task_attempt_id: str = ""

    def __str__(self) -> str:
        label = f"{self.kind}:{self.name}"
        return f"{label}#{self.task_attempt_id}" if self.task_attempt_id else label

    @classmethod
    def user(cls, username: str) -> Actor:
        return cls("user", username)

    @classmethod
    def api_key(cls, name: str, prefix: str) -> Actor:
        return cls("api_key", f"{name}({prefix})")

    @classmethod
    def worker(cls, task_name: str, task_attempt_id: str) -> Actor:
        return cls("worker", task_name, task_attempt_id)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls("system", name)
