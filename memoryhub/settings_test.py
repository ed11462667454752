"""Settings for the test suite (pytest's DJANGO_SETTINGS_MODULE, see pyproject.toml).

The production settings refuse to start without SECRET_KEY; tests get a fixed test key here, set
in the environment before they load so that the processes tests start (gunicorn, Celery workers)
inherit it along with DJANGO_SETTINGS_MODULE.
"""

import os

os.environ.setdefault("SECRET_KEY", "memoryhub-test-only-secret-key-never-use-in-production-7f3a9c2e5b1d")

from memoryhub.settings import *  # noqa: F403

TESTING = True
# Fast hashing: tests create many users and log in often.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
