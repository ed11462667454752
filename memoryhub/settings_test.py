"""Settings for the test suite (pytest's DJANGO_SETTINGS_MODULE, see pyproject.toml).

The production settings refuse to start without SECRET_KEY; tests get a fixed test key here, set
in the environment before they load so that the processes tests start (gunicorn, Celery workers)
inherit it along with DJANGO_SETTINGS_MODULE.
"""

import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "memoryhub-test-only-secret-key-never-use-in-production-7f3a9c2e5b1d")

# pytest-xdist: each worker process (gw0, gw1, …) gets its own var dir — SQLite test database,
# filesystem broker, beat schedule, API key files — under the one it was given. Done here, before
# the settings load, and in the environment, so the Celery workers, gunicorn servers and
# manage.py processes a test starts inherit it; the marker keeps those children (which inherit
# PYTEST_XDIST_WORKER too) from nesting it again, and leaves a var dir a test chose alone.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if XDIST_WORKER and not os.environ.get("MEMORYHUB_XDIST_VAR_DIR"):
    _base = Path(os.environ.get("MEMORYHUB_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["MEMORYHUB_VAR_DIR"] = os.environ["MEMORYHUB_XDIST_VAR_DIR"] = str(
        _base / f"xdist-{XDIST_WORKER}"
    )

from memoryhub.settings import *  # noqa: E402, F403

TESTING = True
# Fast hashing: tests create many users and log in often.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if XDIST_WORKER and CELERY_BROKER_URL.startswith(("redis://", "rediss://")):  # noqa: F405
    # One Redis database for all workers (CI): each worker's queues under its own key prefix, so a
    # worker's purge or Celery worker never touches another's messages. (PostgreSQL test databases
    # are per worker already: pytest-django names them test_<name>_gw0, …)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "global_keyprefix": f"memoryhub-test-{XDIST_WORKER}:",
    }
