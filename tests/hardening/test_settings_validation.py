"""Every environment variable the settings read is checked at start (memoryhub.core.envconfig).

Enumerated, not listed: the variables are the ones settings.py registered while loading (every
read goes through ``envconfig.Env``), and the source of settings.py is parsed to make sure no
variable is read any other way. Each gets the bad value its form declares; the settings must
refuse to load with a message naming the variable and the expected form.
"""

from __future__ import annotations

import ast
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from memoryhub.core import envconfig

SETTINGS_FILE = Path(settings.BASE_DIR) / "memoryhub" / "settings.py"
# Some variables are read only on one side of a branch (PostgreSQL's connection age, Redis's key
# prefix, a non-filesystem broker's visibility timeout, the database cache's size): the probe
# loads the settings once per side. URLs are only parsed, never connected to.
SERVERS = {
    "DATABASE_URL": "postgres://probe@127.0.0.1:1/probe",
    "REDIS_CACHE_URL": "redis://127.0.0.1:1/0",
    "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
    "DATABASE_REPLICA_URL": "postgres://probe@127.0.0.1:1/replica",
}
EMBEDDED = {name: "" for name in SERVERS}
SIDES = {"servers": SERVERS, "embedded": EMBEDDED}


def _load_settings(side: dict[str, str] = EMBEDDED, **variables: str) -> dict:
    saved = dict(os.environ)
    os.environ.update({**side, **variables})
    try:
        return runpy.run_path(str(SETTINGS_FILE), run_name="memoryhub_settings_probe")
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _variables_by_side() -> tuple[dict[str, dict[str, str]], dict[str, envconfig.Variable]]:
    """variable -> the side (environment) under which the settings read it, and its declaration
    (kept here: the registry holds only what the last load read, so it depends on test order)."""
    found: dict[str, dict[str, str]] = {}
    declared: dict[str, envconfig.Variable] = {}
    for side in SIDES.values():
        envconfig.REGISTRY.clear()
        _load_settings(side)
        for name, variable in envconfig.REGISTRY.items():
            found.setdefault(name, side)
            declared.setdefault(name, variable)
    return found, declared


SIDE_OF, DECLARED = _variables_by_side()
VARIABLES = sorted(SIDE_OF)


def test_the_settings_read_some_variables_and_load_as_they_are():
    assert len(VARIABLES) >= 40, VARIABLES  # the registry was filled while the settings loaded
    assert _load_settings(LOG_LEVEL="info")["LOGGING"]["root"]["level"] == "INFO"
    assert {"SECRET_KEY", "DATABASE_URL", "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS"} <= set(VARIABLES)
    loaded = _load_settings()
    assert loaded["MEMORYHUB_MAX_BODY_BYTES"] == settings.MEMORYHUB_MAX_BODY_BYTES


@pytest.mark.parametrize("name", VARIABLES)
def test_a_malformed_value_stops_startup_naming_the_variable_and_its_form(name):
    variable = DECLARED[name]
    with pytest.raises(ValueError):  # the declared bad example is one the form refuses
        variable.form.parse(variable.form.bad)
    with pytest.raises(ImproperlyConfigured) as refused:
        _load_settings(SIDE_OF[name], **{name: variable.form.bad})
    message = str(refused.value)
    assert f"{name} must be {variable.form.describe}" in message
    if variable.secret:
        assert variable.form.bad not in message  # a secret's value is never echoed


def _names_read_in(tree: ast.AST) -> tuple[set[str], list[str]]:
    """(variables read through ``env``, other ways the source touches the environment)."""
    names, other = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            through_env = (isinstance(func, ast.Name) and func.id == "env") or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "env"
            )
            if through_env and node.args and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
            elif through_env and not (isinstance(func, ast.Attribute) and func.attr == "raise_problems"):
                other.append(ast.unparse(node))
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "getenvb"):
            text = ast.unparse(node)
            if text != "environ.Env.read_env":
                other.append(text)
    return names, other


def test_every_variable_of_the_settings_goes_through_the_checked_reader():
    names, other = _names_read_in(ast.parse(SETTINGS_FILE.read_text()))
    allowed_other = {"environ.Env"}  # .env file loading only (it fills os.environ, read below)
    assert not [o for o in other if o not in allowed_other], other
    assert names, "the parse found no env reads"
    assert names <= set(VARIABLES), names - set(VARIABLES)


def test_the_probe_sees_a_read_that_bypasses_the_checked_reader():
    # The enumeration above must be able to fail: a bare os.environ read is reported.
    _, other = _names_read_in(ast.parse('import os\nX = os.environ.get("X", "")\nY = env("Y")\n'))
    assert "os.environ" in other
    names, _ = _names_read_in(ast.parse('Y = env.int("Y", 1)\n'))
    assert names == {"Y"}


@pytest.mark.parametrize(
    ("name", "value", "parsed"),
    [
        (
            "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS",
            "127.0.0.1/32, 10.0.0.0/8,::1/128",
            ["127.0.0.1/32", "10.0.0.0/8", "::1/128"],
        ),
        ("MEMORYHUB_TRUSTED_PROXIES", "2", 2),
        ("ALLOWED_HOSTS", ".example.com,127.0.0.1,[::1]", [".example.com", "127.0.0.1", "[::1]"]),
        ("DEBUG", "Yes", True),
        ("MEMORYHUB_LLM_BASE_URL", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("MEMORYHUB_CLIENT_IP_HEADER", "X-Forwarded-For", "X-Forwarded-For"),
        ("DEFAULT_FROM_EMAIL", "MemoryHub <hub@example.com>", "MemoryHub <hub@example.com>"),
        ("MEMORYHUB_REDACT_PATTERNS", r"CUST-\d{6}", [r"CUST-\d{6}"]),
    ],
)
def test_well_formed_values_are_parsed(name, value, parsed):
    assert _load_settings(**{name: value})[name] == parsed


def test_rates_take_every_period_the_throttles_understand():
    for rate in ("5/s", "20/min", "100/hour", "1/d"):
        assert envconfig.Env({"R": rate}).rate("R", "1/min") == rate


def test_manage_check_refuses_to_start_with_a_host_name_among_the_channel_networks(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "MEMORYHUB_VAR_DIR": str(tmp_path),
        "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS": "127.0.0.1/32,hooks.example.com",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert (
        "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS must be a comma-separated list of networks in CIDR" in done.stderr
    )
    assert "hooks.example.com" in done.stderr


def test_a_directory_setting_that_cannot_be_made_stops_startup_naming_it(tmp_path):
    (tmp_path / "taken").write_text("a file where the directory would go")
    env = envconfig.Env({"MEMORYHUB_VAR_DIR": str(tmp_path / "taken" / "var")})
    assert env.path("MEMORYHUB_VAR_DIR", tmp_path / "default") == tmp_path / "default"
    with pytest.raises(
        ImproperlyConfigured, match="MEMORYHUB_VAR_DIR must be an absolute path of a directory"
    ):
        env.raise_problems()
