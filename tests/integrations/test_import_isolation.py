"""The client and the framework integrations run in the agent's process: every module of
memoryhub/client/ and memoryhub/integrations/ imports without Django (enumerated from the tree,
so a new module is checked the day it is added)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.test_import_isolation import _run_isolated

ROOT = Path(__file__).resolve().parents[2]
AGENT_SIDE = ("client", "integrations")


def _modules() -> list[str]:
    found = []
    for package in AGENT_SIDE:
        for path in sorted((ROOT / "memoryhub" / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _django_imports_of(module: str):
    """Import ``module`` in a fresh interpreter whose every attempt to import django (caught or
    not) is recorded and refused; the output names the attempts."""
    return _run_isolated(
        f"""
        import sys
        attempts = []

        class NoDjango:
            def find_spec(self, name, path=None, target=None):
                if name == "django" or name.startswith("django."):
                    attempts.append(name)
                    raise ImportError(f"django is not available here ({{name}})")
                return None

        sys.meta_path.insert(0, NoDjango())
        import {module}
        leaked = [m for m in sys.modules if m == "django" or m.startswith("django.")]
        print("attempts=" + ",".join(attempts + leaked))
        """
    )


def test_every_agent_side_module_is_enumerated():
    modules = _modules()
    assert "memoryhub.client" in modules and "memoryhub.integrations.langchain" in modules
    assert not any("otel_ingest" in m for m in modules), "the OTLP ingest is server side: memoryhub.otel"


@pytest.mark.parametrize("module", _modules())
def test_agent_side_module_imports_without_django(module):
    result = _django_imports_of(module)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "attempts=", result.stdout


def test_the_check_catches_a_module_that_imports_django():
    result = _django_imports_of("memoryhub.otel.ingest")
    assert result.returncode != 0 and "django is not available here" in result.stderr
