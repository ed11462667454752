"""The framework integrations run in the agent's process: they import without Django."""

from __future__ import annotations

import pytest

from tests.client.test_import_isolation import _run_isolated


@pytest.mark.parametrize(
    "module",
    [
        "memoryhub.integrations.langchain",
        "memoryhub.integrations.openai_agents",
        "memoryhub.integrations.recorder",
    ],
)
def test_integration_imports_with_django_unavailable(module):
    result = _run_isolated(
        f"""
        import sys
        sys.modules["django"] = None  # any "import django" now raises ImportError
        import {module}
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
