#!/usr/bin/env python3
"""Rewrite pre-restructuring import paths to memoryhub's sub-packages (idempotent).

memoryhub's flat modules were grouped into sub-packages (core, memory, context, accounts, observe,
web). Run this over a branch written against the old layout after merging main:

    python scripts/rewrite_imports.py            # rewrites tracked files in place, lists them
    python scripts/rewrite_imports.py --check    # exits 1 if anything still uses an old path
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old dotted name -> new dotted name. Packages carry their sub-modules along.
MODULES = {
    **{
        f"memoryhub.{m}": f"memoryhub.core.{m}"
        for m in (
            "canonical",
            "errors",
            "tokens",
            "opaque",
            "redaction",
            "actors",
            "append_only",
            "partitioning",
            "db_role",
            "db_router",
            "quality",
            "facts",
        )
    },
    **{
        f"memoryhub.{m}": f"memoryhub.memory.{m}"
        for m in (
            "events",
            "summaries",
            "validation",
            "lifecycle",
            "quality_service",
            "observed",
            "workflows",
            "search",
        )
    },
    "memoryhub.compaction.jobs": "memoryhub.pipeline.jobs",
    "memoryhub.compaction.tasks": "memoryhub.tasks.compaction",
    # Celery task modules are delivery: they moved into the memoryhub.tasks package.
    "memoryhub.pipeline.tasks": "memoryhub.tasks.compaction",
    "memoryhub.alerting.tasks": "memoryhub.tasks.alerting",
    "memoryhub.observe.alerting.tasks": "memoryhub.tasks.alerting",
    "memoryhub.compaction.worker": "memoryhub.pipeline.worker",
    "memoryhub.compaction.bench": "memoryhub.bench.compaction",
    "memoryhub.integrations.anthropic_compaction": "memoryhub.client.anthropic",
    # Server-side, so out of the agent-side integrations (decode_request → memoryhub.otel.read_spans).
    "memoryhub.integrations.otel_ingest": "memoryhub.otel",
    "memoryhub.integrations.example_graph": "memoryhub.examples.example_graph",
    "memoryhub.integrations.langchain_example": "memoryhub.examples.langchain_example",
    "memoryhub.integrations.openai_agents_example": "memoryhub.examples.openai_agents_example",
    "memoryhub.context": "memoryhub.context.assembly",
    "memoryhub.traces": "memoryhub.context.traces",
    "memoryhub.tenancy": "memoryhub.accounts.tenancy",
    "memoryhub.alerts_defaults": "memoryhub.accounts.alerts_defaults",
    **{f"memoryhub.{m}": f"memoryhub.observe.{m}" for m in ("metrics", "figures")},
    **{
        f"memoryhub.{m}": f"memoryhub.web.{m}"
        for m in (
            "pages",
            "middleware",
            "context_processors",
            "login_throttle",
            "ratelimit",
            "tenancy_context",
        )
    },
}
PACKAGES = {
    "memoryhub.alerting": "memoryhub.observe.alerting",
    "memoryhub.api": "memoryhub.web.api",
    "memoryhub.views": "memoryhub.web.views",
}
# Dotted names followed by "-" or "/" are data, not modules ("memoryhub.opaque/v1" is a schema id).
# Old modules that became a package of the same name: its modules (read from the tree, so a new
# module such as memoryhub.context.timeline is new code, not an old path) are not rewritten.
NEW_SUBPACKAGES = ("memoryhub.context",)
SUFFIXES = (".py", ".md", ".html", ".toml", ".cfg", ".ini", ".txt", ".sh", ".yml", ".yaml", ".json")
SELF = Path(__file__).resolve()


def _package_children(new_dotted: str) -> set[str]:
    path = ROOT / new_dotted.replace(".", "/")
    if not path.is_dir():
        return set()
    return {p.stem for p in path.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}


@functools.cache
def _dotted_patterns() -> list[tuple[re.Pattern[str], str]]:
    patterns = []
    for old, new in MODULES.items():
        children = sorted(_package_children(old) - {"__init__"}) if old in NEW_SUBPACKAGES else None
        alts = "|".join(children or ())
        # `memoryhub.context.traces` and `from memoryhub.context import traces` are already new.
        skip = rf"(?!\.(?:{alts})\b|\s+import\s+\(?\s*(?:{alts})\b)" if children else ""
        patterns.append((re.compile(rf"(?<![\w.]){re.escape(old)}(?![\w/-]){skip}"), new))
    for old, new in PACKAGES.items():
        # Only module references: `memoryhub.alerting.send_test` is a Celery task *name*, kept.
        children = sorted(_package_children(new) | {"__init__"})
        tail = rf"(?=\.(?:{'|'.join(children)})\b|[^\w./-]|$)"
        patterns.append((re.compile(rf"(?<![\w.]){re.escape(old)}{tail}"), new))
    return patterns


@functools.cache
def _path_patterns() -> list[tuple[re.Pattern[str], str]]:
    patterns = []
    for old, new in MODULES.items():
        patterns.append(
            (
                re.compile(rf"(?<![\w/.]){re.escape(old.replace('.', '/'))}\.py\b"),
                new.replace(".", "/") + ".py",
            )
        )
    for old, new in PACKAGES.items():
        patterns.append(
            (
                re.compile(rf"(?<![\w/.]){re.escape(old.replace('.', '/'))}(?=/|\b)(?!\.py)"),
                new.replace(".", "/"),
            )
        )
    return patterns


FROM_MEMORYHUB = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<package>memoryhub(?:\.\w+)*) import (?P<names>[^()\n#]+?)(?P<comment>[ \t]*#.*)?$",
    re.M,
)


def _split_from_memoryhub(match: re.Match[str]) -> str:
    indent, comment, package = match["indent"], match["comment"] or "", match["package"]
    groups: dict[str, list[str]] = {}
    for item in (part.strip() for part in match["names"].split(",")):
        if not item:
            continue
        name, _, alias = item.partition(" as ")
        name, alias = name.strip(), alias.strip()
        old = f"{package}.{name}"
        new = MODULES.get(old) or PACKAGES.get(old)
        if new is None:
            groups.setdefault(package, []).append(item)
            continue
        parent, _, leaf = new.rpartition(".")
        groups.setdefault(parent, []).append(f"{leaf} as {alias or name}" if leaf != name or alias else leaf)
    lines = [f"{indent}from {parent} import {', '.join(items)}" for parent, items in groups.items()]
    lines[-1] += comment
    return "\n".join(lines)


def rewrite(text: str) -> str:
    text = FROM_MEMORYHUB.sub(_split_from_memoryhub, text)
    for pattern, new in _dotted_patterns() + _path_patterns():
        text = pattern.sub(new, text)
    return text


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / line for line in out.splitlines() if line.endswith(SUFFIXES) or line.endswith("Makefile")]


def main() -> int:
    check = "--check" in sys.argv
    changed = []
    for path in tracked_files():
        if path.resolve() == SELF or not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        # The import-linter contracts name the new packages ("memoryhub.context" is one now).
        head, marker, contracts = text.partition("[tool.importlinter]")
        new = rewrite(head) + marker + contracts
        if new != text:
            changed.append(path.relative_to(ROOT))
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(path)
    if check and changed:
        print(f"{len(changed)} file(s) still use pre-restructuring paths", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
