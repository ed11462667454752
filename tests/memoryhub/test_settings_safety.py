"""Settings fail closed and have no side effects: no SECRET_KEY without DEBUG = no process; importing
them creates no directories; the cache every web process shares is never per-process memory."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

SECURITY_VARS = {"SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE", "REDIS_CACHE_URL"}


def run_python(code: str, **env_overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SECURITY_VARS}
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


LOAD_SETTINGS = (
    "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY[:8])"
)


def test_production_settings_refuse_to_start_without_secret_key():
    out = run_python(LOAD_SETTINGS, DJANGO_SETTINGS_MODULE="memoryhub.settings")
    assert out.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in out.stderr


def test_debug_alone_may_use_the_development_key():
    out = run_python(LOAD_SETTINGS, DJANGO_SETTINGS_MODULE="memoryhub.settings", DEBUG="true")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dev-inse"


def test_wsgi_and_celery_entry_points_fail_closed_too():
    for module in ("memoryhub.wsgi", "memoryhub.celery"):
        code = f"import {module}; from django.conf import settings; settings.SECRET_KEY"
        out = run_python(code)  # their own default settings module, no key, no DEBUG
        assert out.returncode != 0 and "SECRET_KEY is not set" in out.stderr, module


def test_a_set_secret_key_is_used_as_is():
    out = run_python(LOAD_SETTINGS, DJANGO_SETTINGS_MODULE="memoryhub.settings", SECRET_KEY="abcdefgh" * 8)
    assert out.returncode == 0 and out.stdout.strip() == "abcdefgh", out.stderr


def test_importing_settings_creates_no_directories(tmp_path):
    var_dir = tmp_path / "fresh-var"
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "from memoryhub.celery import app; print(settings.VAR_DIR)"
    )
    out = run_python(code, DJANGO_SETTINGS_MODULE="memoryhub.settings_test", MEMORYHUB_VAR_DIR=str(var_dir))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(var_dir)
    assert not var_dir.exists()


def test_the_filesystem_broker_folders_appear_when_celery_is_configured(tmp_path):
    var_dir = tmp_path / "fresh-var"
    code = "from memoryhub.celery import app; app.loader.import_default_modules(); print(app.conf.broker_url)"
    out = run_python(
        code,
        DJANGO_SETTINGS_MODULE="memoryhub.settings_test",
        MEMORYHUB_VAR_DIR=str(var_dir),
        CELERY_BROKER_URL="filesystem://",
    )
    assert out.returncode == 0, out.stderr
    assert (var_dir / "broker" / "queue").is_dir() and (var_dir / "broker" / "processed").is_dir()


def test_tests_run_on_the_test_settings_module():
    assert os.environ["DJANGO_SETTINGS_MODULE"] == "memoryhub.settings_test"
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_the_default_cache_is_shared_between_processes():
    """Without Redis the cache is the database table, never process memory."""
    out = run_python(
        "import django; django.setup(); from django.conf import settings; print(settings.CACHES['default']['BACKEND'])",
        DJANGO_SETTINGS_MODULE="memoryhub.settings_test",
    )
    assert out.stdout.strip() == "django.core.cache.backends.db.DatabaseCache", out.stderr
    out = run_python(
        "import django; django.setup(); from django.conf import settings; print(settings.CACHES['default']['BACKEND'])",
        DJANGO_SETTINGS_MODULE="memoryhub.settings_test",
        REDIS_CACHE_URL="redis://127.0.0.1:6379/8",
    )
    assert out.stdout.strip() == "django.core.cache.backends.redis.RedisCache", out.stderr


def test_demo_environment_runs_with_debug_off_and_a_generated_key_kept_under_var(tmp_path):
    """scripts/dev-env.sh (sourced by scripts/demo.sh and `make bench`) from a fresh directory:
    DEBUG off, a generated development key kept in var/ (mode 600) and reused on the next run."""
    script = settings.BASE_DIR / "scripts" / "dev-env.sh"
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG, settings.SECRET_KEY)"
    command = f'. "{script}" && cd "{settings.BASE_DIR}" && "$PY" -c "{code}"'

    def run() -> tuple[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SECURITY_VARS}
        env.update(PY=sys.executable, DJANGO_SETTINGS_MODULE="memoryhub.settings")
        out = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        debug, key = out.stdout.split()
        return debug, key

    debug, key = run()
    key_file = tmp_path / "var" / "dev-secret-key"
    assert debug == "False" and len(key) >= 50 and key_file.read_text().strip() == key
    assert key_file.stat().st_mode & 0o077 == 0
    assert run() == ("False", key)
