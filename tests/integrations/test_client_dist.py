"""The light client distribution (scripts/client_dist, ``make client-dist``) installs and runs
without Django: built offline into tmp_path, installed into a fresh venv whose only third-party
code is httpx and its own requirements (copied from this interpreter's site-packages)."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _build_module():
    spec = importlib.util.spec_from_file_location(
        "client_dist_build", ROOT / "scripts" / "client_dist" / "build.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _closure(name: str, seen: set[str] | None = None) -> set[str]:
    """``name`` and every distribution it requires (no extras), as installed here."""
    seen = seen if seen is not None else set()
    key = name.lower().replace("_", "-")
    if key in seen:
        return seen
    seen.add(key)
    for req in md.distribution(name).requires or []:
        if "extra ==" in req:
            continue
        dep = re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0]
        try:
            md.distribution(dep)
        except md.PackageNotFoundError:
            continue  # an environment marker excluded it here
        _closure(dep, seen)
    return seen


def _copy_distribution(name: str, site: Path) -> None:
    dist = md.distribution(name)
    for file in dist.files or []:
        source = Path(dist.locate_file(file))
        if source.is_file() and ".." not in file.parts:
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("client-dist")
    wheel = _build_module().build(tmp / "dist")
    env = tmp / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    for name in _closure("httpx"):
        _copy_distribution(name, site)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )  # fmt: skip
    return env


def test_the_wheel_ships_the_django_free_modules_and_leaves_the_server_out():
    shipped, left_out = _build_module().client_modules()
    names = {p.relative_to(ROOT).as_posix() for p in shipped}
    assert {
        "memoryhub/client/client.py",
        "memoryhub/integrations/claude_code.py",
        "memoryhub/client/anthropic.py",
    } <= names
    assert all(
        path.parent.name == "integrations" for path in left_out
    )  # the client itself is all Django-free


def test_client_integrations_and_hook_run_without_django(installed):
    python = installed / "bin" / "python"
    script = (
        "import importlib.util, memoryhub.client, memoryhub.client.resilience, memoryhub.client.anthropic, "
        "memoryhub.integrations.claude_code, memoryhub.integrations.langgraph, memoryhub.integrations.recorder, "
        "memoryhub.integrations.anthropic\n"
        "assert importlib.util.find_spec('django') is None and importlib.util.find_spec('rest_framework') is None\n"
        "print(memoryhub.client.__file__)\n"
        "for module, extra in (('openai_agents', 'agents'), ('langchain', 'langchain')):\n"
        "    try:\n"
        "        __import__('memoryhub.integrations.' + module)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        assert exc.name.split('.')[0] == extra, exc.name  # only its framework extra is missing\n"
    )
    done = subprocess.run([python, "-I", "-c", script], capture_output=True, text=True, cwd=installed)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(installed))  # the installed copy, not this checkout
    hook = subprocess.run([installed / "bin" / "memoryhub-hook", "--help"], capture_output=True, text=True)
    assert hook.returncode == 0 and "MEMORYHUB_HOOK_TIMEOUT" in hook.stdout, hook.stderr


def test_every_extra_the_docs_name_exists():
    """``memoryhub-audit-client[x]`` in the client config, ``memoryhub[x]`` in the server's."""
    import tomllib

    docs = "\n".join((ROOT / p).read_text() for p in ("README.md", "docs/ARCHITECTURE.md", "CONTRIBUTING.md"))
    for config_path, dist in (
        ("scripts/client_dist/pyproject.toml", "memoryhub-audit-client"),
        ("pyproject.toml", "memoryhub"),
    ):
        config = tomllib.loads((ROOT / config_path).read_text())
        extras = set(config["project"]["optional-dependencies"])
        named = set(re.findall(rf"(?<![\w-]){re.escape(dist)}\[([a-z-]+)\]", docs))
        assert named and named <= extras, (dist, named - extras)
    client = tomllib.loads((ROOT / "scripts/client_dist/pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(client["all"]) == {r for name, reqs in client.items() if name != "all" for r in reqs}
