"""The client and the LangGraph helper import without Django (and without langgraph)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    # -I: no site-packages tricks from the environment, no cwd on sys.path, no PYTHON* variables.
    # The venv's site-packages stay (httpx lives there); only the repo root is added.
    prelude = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    return subprocess.run(
        [sys.executable, "-I", "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_client_imports_with_django_unavailable():
    result = _run_isolated(
        """
        import sys
        sys.modules["django"] = None  # any "import django" now raises ImportError
        import memoryhub.client
        from memoryhub.client import MemoryHubClient
        MemoryHubClient("http://127.0.0.1:9", api_key="k").close()
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_client_import_loads_no_django_module():
    result = _run_isolated(
        """
        import sys
        import memoryhub.client
        import memoryhub.integrations.langgraph
        leaked = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
        print(",".join(leaked) or "none")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


def test_langgraph_helper_imports_without_langgraph_or_langchain():
    result = _run_isolated(
        """
        import sys
        for name in ("django", "langgraph", "langchain_core"):
            sys.modules[name] = None
        from memoryhub.integrations.langgraph import prepare_context, message_to_events
        print(message_to_events(("user", "hi"), workflow_id="wf", agent="a")[0]["content"])
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hi"


def test_no_django_import_statement_in_the_client_package():
    for path in (ROOT / "memoryhub" / "client").glob("*.py"):
        source = path.read_text()
        assert "import django" not in source and "from django" not in source, path
