"""Build the light client wheel (``memoryhub-audit-client``): ``python scripts/client_dist/build.py [OUT]``.

Stages ``memoryhub/__init__.py`` and every module of ``memoryhub/client`` and
``memoryhub/integrations`` that imports nothing of the server (no Django, DRF, Celery, nor
``memoryhub``'s server packages) beside this folder's ``pyproject.toml``, then builds the wheel
with ``pip wheel --no-deps --no-build-isolation`` (offline). A module left out is printed: the
server-side ones (the OTLP ingest) belong to the server distribution.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PACKAGES = ("client", "integrations")
SERVER_ONLY = frozenset(
    {"django", "rest_framework", "drf_spectacular", "celery", "django_filters", "audit", "triggers"}
)


def server_imports(path: Path) -> list[str]:
    """The imports of ``path`` that need the server (empty: the module can ship in the client)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top, _, rest = name.partition(".")
            inside = rest.split(".")[0] if rest else ""
            if top in SERVER_ONLY or (top == "memoryhub" and inside not in ("", *PACKAGES)):
                found.append(name)
    return found


def client_modules() -> tuple[list[Path], dict[Path, list[str]]]:
    """(modules that ship, {left-out module: its server imports})."""
    shipped, left_out = [ROOT / "memoryhub" / "__init__.py"], {}
    for package in PACKAGES:
        for path in sorted((ROOT / "memoryhub" / package).glob("*.py")):
            needs = server_imports(path)
            if needs:
                left_out[path] = needs
            else:
                shipped.append(path)
    return shipped, left_out


def server_version() -> str:
    match = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text())
    if not match:
        raise SystemExit("no version in pyproject.toml")
    return match.group(1)


def stage(directory: Path) -> list[Path]:
    shipped, left_out = client_modules()
    for path in shipped:
        target = directory / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    config = (
        (HERE / "pyproject.toml")
        .read_text()
        .replace('version = "0.0.0"', f'version = "{server_version()}"', 1)
    )
    (directory / "pyproject.toml").write_text(config)
    for path, needs in left_out.items():
        print(f"left out (server side): {path.relative_to(ROOT)} imports {', '.join(sorted(set(needs)))}")
    return shipped


def build(out: Path) -> Path:
    """Build the wheel into ``out``; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memoryhub-client-dist-") as tmp:
        stage(Path(tmp))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(out),
                tmp,
            ],
            check=True,
        )
    (wheel,) = sorted(out.glob(f"memoryhub_audit_client-{server_version()}-*.whl"))
    return wheel


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "var" / "dist"))
