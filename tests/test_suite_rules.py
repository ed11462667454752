"""The rules that keep the suite fast and safe in parallel workers (CONTRIBUTING: "Parallel tests"),
checked on every test module, so a test added on another branch is held to them too."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.models import Tenant
from tests.snapshots import Snapshot

TESTS = Path(__file__).resolve().parent
# A fresh load is what these test (the rollups backfill is left out of the shared demo).
FRESH_LOAD_ALLOWED = {"tests/memoryhub/test_demo_rollups.py"}
DEMO_FIXTURES = {"loaded", "demo_db", "demo_template"}


def _loads_the_demo(call: ast.Call) -> bool:
    """``loader.load(…)`` or ``call_command("load_demo", …)`` without --live-steps."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "load" and getattr(func.value, "id", "") == "loader":
        return True
    if getattr(func, "id", "") != "call_command" or not call.args:
        return False
    args = [a.value for a in call.args if isinstance(a, ast.Constant)]
    return args[:1] == ["load_demo"] and "--live-steps" not in args


def _demo_loads_outside_the_template(tests: Path = TESTS) -> list[str]:
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests.parent).as_posix()
        if rel in FRESH_LOAD_ALLOWED:
            continue
        for func in ast.walk(ast.parse(path.read_text())):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            # A test that already has the demo may call load_demo again (the refusal, --skip-if-loaded).
            if DEMO_FIXTURES & {a.arg for a in func.args.args}:
                continue
            found += [
                f"{rel}:{node.lineno} ({func.name})"
                for node in ast.walk(func)
                if isinstance(node, ast.Call) and _loads_the_demo(node)
            ]
    return found


def test_no_test_loads_the_demo_itself():
    """Half a minute per load: tests take the session's copy (``loaded`` / ``demo_db``)."""
    assert _demo_loads_outside_the_template() == []


def test_the_rule_sees_a_load_in_a_test(tmp_path):
    """The check above can fail: a module that loads the demo itself is reported."""
    module = tmp_path / "tests" / "memoryhub" / "test_probe.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from django.core.management import call_command\n"
        "def test_probe(db):\n"
        "    call_command('load_demo', '--no-rollups')\n"
        "def test_probe_on_the_demo(loaded):\n"
        "    call_command('load_demo', '--skip-if-loaded')\n"
    )
    assert _demo_loads_outside_the_template(tmp_path / "tests") == [
        "tests/memoryhub/test_probe.py:3 (test_probe)"
    ]


SHOW_SETTINGS = """
import json, django
from django.conf import settings
django.setup()
print(json.dumps({
    "var": str(settings.VAR_DIR),
    "db": str(settings.DATABASES["default"].get("TEST", {}).get("NAME", "")),
    "broker": settings.CELERY_BROKER_TRANSPORT_OPTIONS,
    "env": __import__("os").environ.get("MEMORYHUB_VAR_DIR"),
}))
"""


def _settings_in_child(env: dict[str, str]) -> dict:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORYHUB_", "PYTEST_XDIST", "DATABASE_URL"))
    }
    done = subprocess.run(
        [sys.executable, "-c", SHOW_SETTINGS],
        cwd=settings.BASE_DIR,
        env={**keep, "DJANGO_SETTINGS_MODULE": "memoryhub.settings_test", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # four Django start-ups in child processes
def test_each_xdist_worker_gets_its_own_var_dir_database_and_broker(tmp_path):
    worker = _settings_in_child(
        {
            "PYTEST_XDIST_WORKER": "gw7",
            "MEMORYHUB_VAR_DIR": str(tmp_path),
            "CELERY_BROKER_URL": "filesystem://",
        }
    )
    mine = tmp_path / "xdist-gw7"
    assert (worker["var"], worker["env"]) == (str(mine), str(mine))
    assert worker["db"] == str(mine / "test_memoryhub.sqlite3")
    assert worker["broker"]["data_folder_in"] == str(mine / "broker" / "queue")
    # A process that worker starts inherits its environment and keeps the same directory.
    child = _settings_in_child(
        {"PYTEST_XDIST_WORKER": "gw7", "MEMORYHUB_VAR_DIR": str(mine), "MEMORYHUB_XDIST_VAR_DIR": str(mine)}
    )
    assert child["var"] == str(mine)
    # On one shared Redis database (CI), each worker's queues live under its own key prefix.
    redis = _settings_in_child(
        {
            "PYTEST_XDIST_WORKER": "gw3",
            "MEMORYHUB_VAR_DIR": str(tmp_path),
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/5",
        }
    )
    assert redis["broker"]["global_keyprefix"] == "memoryhub-test-gw3:"
    # Outside xdist nothing changes.
    plain = _settings_in_child({"MEMORYHUB_VAR_DIR": str(tmp_path)})
    assert plain["var"] == str(tmp_path) and "global_keyprefix" not in plain["broker"]


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_brings_the_database_back_as_it_was(tmp_path):
    create_tenant("kept", "Kept")
    snapshot = Snapshot("rules-probe", tmp_path)
    try:
        create_tenant("later", "Later")
        snapshot.restore()
        assert sorted(Tenant.objects.values_list("slug", flat=True)) == ["kept"]
    finally:
        snapshot.drop()
