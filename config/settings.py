"""Countersign settings: one module, driven by environment variables.

Environment:

- ``DATABASE_URL``: any dj-database-url URL; default SQLite in the project folder.
- ``REDIS_URL``: when set, Celery workers (broker) and the Redis channel layer are
  used; when unset, the embedded default runs runs and executions on a thread pool
  in the server process and uses the in-memory channel layer.
- ``SECRET_KEY``, ``DEBUG`` (``1``/``0``), ``ALLOWED_HOSTS`` (comma-separated),
  ``CSRF_TRUSTED_ORIGINS`` (comma-separated).
- Production (``DEBUG=0``): secure defaults, each overridable: ``SECURE_SSL_REDIRECT``,
  ``SESSION_COOKIE_SECURE``, ``CSRF_COOKIE_SECURE``, ``SECURE_HSTS_SECONDS``,
  ``SECURE_HSTS_INCLUDE_SUBDOMAINS``, ``SECURE_HSTS_PRELOAD``; ``LOG_FORMAT``
  (``json``/``text``), ``LOG_LEVEL``, ``STATIC_ROOT``, ``STATIC_MANIFEST``,
  ``CHANNEL_LAYER_PREFIX``.
- Provider keys (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``) and
  base URLs are read only by the agent configuration in ``COUNTERSIGN_AGENTS``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str) -> list[str]:
    return [
        item.strip()
        for item in os.environ.get(name, default).split(",")
        if item.strip()
    ]


DEBUG = _env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "insecure-dev-key-set-SECRET_KEY-in-production" if DEBUG else ""
)
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
if os.environ.get("POD_IP"):
    # Kubernetes (the downward API): Prometheus scrapes each web pod by its address.
    ALLOWED_HOSTS.append(os.environ["POD_IP"])
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    # Login lockouts (web.ratelimit); its access attempts are in the admin.
    "axes",
    "threads",
    "approvals",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "web.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes requires: turns a locked-out login into its 429 page.
    "axes.middleware.AxesMiddleware",
]

# django-axes checks each login against its lockouts first (web.ratelimit).
AUTHENTICATION_BACKENDS = [
    "web.ratelimit.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login lockout: LOGIN_FAILURE_LIMIT wrong passwords for one username, or from one
# client address, lock that username or address out for LOGIN_LOCKOUT_SECONDS
# (429 with Retry-After, and an audit entry); a successful login resets them.
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT") or 5)
AXES_COOLOFF_TIME = timedelta(
    seconds=float(os.environ.get("LOGIN_LOCKOUT_SECONDS") or 900)
)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "web.ratelimit.login_lockout_response"
# The address is REMOTE_ADDR: behind a proxy, let the ASGI server set it from
# X-Forwarded-For (uvicorn --forwarded-allow-ips).
AXES_CLIENT_IP_CALLABLE = "web.ratelimit.login_client_address"
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

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
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads write (the server and the embedded run pool): wait for the
    # lock instead of failing at once, and take the write lock at BEGIN.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    )
    # A file (not :memory:) so worker and server subprocesses see the test data; one
    # per process so concurrent test sessions never share it.
    DATABASES["default"]["TEST"] = {
        "NAME": str(BASE_DIR / f"test-db-{os.getpid()}.sqlite3")
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
if os.environ.get("COUNTERSIGN_FAST_PASSWORD_HASHER") == "1":
    # The test suite only: PBKDF2 costs ~1.3 s per password on a small machine, and
    # workers and servers a test starts must verify the passwords it hashed.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = DEBUG
if not DEBUG:
    # Compressed copies served by WhiteNoise after ``collectstatic``; the manifest
    # (hashed names, cached forever) only where collectstatic ran at build time.
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {
            "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if _env_bool("STATIC_MANIFEST", False)
            else "whitenoise.storage.CompressedStaticFilesStorage"
        },
    }

# Largest request body read (bytes): AG-UI inputs carry a thread's whole history.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(
    os.environ.get("MAX_REQUEST_BYTES", str(10 * 1024 * 1024))
)

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # Pub/Sub ignores Redis database numbers: deployments sharing one Redis
            # need distinct prefixes.
            "CONFIG": {
                "hosts": [REDIS_URL],
                "prefix": os.environ.get("CHANNEL_LAYER_PREFIX") or "asgi",
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: used when REDIS_URL is set; the embedded default runs tasks on a thread
# pool in the server process instead (threads.execution).
# The module defining the Celery app, imported before the first task is sent
# (threads.execution.celery_app); config/__init__ does not import it (bench B6).
COUNTERSIGN_CELERY_APP = "config.celery"
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", "900"))
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", "960"))
# Longer than the hard time limit, so a running task is never redelivered while
# still executing (BC32).
_VISIBILITY_TIMEOUT = int(
    os.environ.get("CELERY_VISIBILITY_TIMEOUT") or CELERY_TASK_TIME_LIMIT + 600
)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": _VISIBILITY_TIMEOUT,
    # A dead worker's unacknowledged message is requeued by a sweep of the
    # unacknowledged index. kombu 5.7 sweeps at a worker's start, then only every
    # interval x throttle seconds (10 x 10 = 100 s by default): a message missed by
    # the start-up sweep came back 100 s late. Sweep every interval (at most 10 s,
    # sooner with a short visibility timeout) so redelivery after a worker's death
    # is bounded by visibility_timeout + interval. A sweep takes milliseconds; the
    # mutex guarding it expires after 10 s (not 300), so a worker killed while
    # holding it delays the next sweep by seconds, not minutes.
    "unacked_restore_interval": min(10, max(1, _VISIBILITY_TIMEOUT)),
    "unacked_restore_throttle": 1,
    "unacked_mutex_expire": 10,
}
if os.environ.get("CELERY_BROKER_PREFIX"):
    # Lets several deployments (or test sessions) share one Redis without
    # consuming each other's tasks.
    CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = os.environ[
        "CELERY_BROKER_PREFIX"
    ]
if REDIS_URL.startswith(("redis://", "rediss://")):
    # kombu's Redis transport with two fixes that keep a busy worker alive across
    # a Redis restart (see config/broker.py).
    CELERY_BROKER_TRANSPORT = "config.broker:Transport"
# A lost broker connection is retried for ever, at startup too: a worker outlives
# a Redis restart or a network blip. Tasks keep running meanwhile and are
# acknowledged over the new connection (never cancelled and redelivered).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_DEFAULT_QUEUE = "countersign"
CELERY_TASK_ROUTES = {
    "threads.tasks.run_agent": {"queue": "runs"},
    "approvals.tasks.execute_tool_call": {"queue": "tools"},
    # A slow notification target must never hold a slot tool executions need.
    "approvals.tasks.deliver_notification": {"queue": "countersign"},
    "approvals.tasks.*": {"queue": "tools"},
}
# The janitor's sweep interval (COUNTERSIGN["JANITOR_INTERVAL_SECONDS"] below):
# it bounds recovery from dead workers and lost broker messages (docs/recovery.md).
_JANITOR_INTERVAL = float(os.environ.get("COUNTERSIGN_JANITOR_INTERVAL_SECONDS") or 10)
CELERY_BEAT_SCHEDULE = {
    "expire-approvals": {"task": "approvals.tasks.expire_approvals", "schedule": 30.0},
    # Announces requests about to expire (approval_expiring) and re-sends
    # notification deliveries a lost broker message left queued.
    "announce-expiring-approvals": {
        "task": "approvals.tasks.announce_expiring_approvals",
        "schedule": 30.0,
    },
    # Recovers runs and executions a dead worker or a lost message left behind
    # (orchestration.janitor); default queue.
    "reap-stale-runs": {
        "task": "threads.janitor.reap_stale_runs",
        "schedule": _JANITOR_INTERVAL,
    },
}
CELERY_IMPORTS = ("orchestration.tasks",)

REST_FRAMEWORK = {
    # Tokens for integrations (admin, or ``manage.py createtoken <username>``),
    # as ``Token <key>`` or ``Bearer <key>``; sessions for the operator UI, with
    # DRF's CSRF check.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "web.authentication.TokenAuthentication",
        "web.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "web.schema.ApiAutoSchema",
    "DEFAULT_PARSER_CLASSES": ["web.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "web.exception_handler.api_exception_handler",
    # Rate limits (web.ratelimit), counted in the "ratelimit" cache: every request
    # per token, message posting per token, AG-UI requests per token, and requests
    # with an unknown token per client address. 429 with Retry-After beyond them.
    "DEFAULT_THROTTLE_CLASSES": ["web.ratelimit.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "api": os.environ.get("API_RATE") or "600/min",
        "messages": os.environ.get("API_MESSAGE_RATE") or "30/min",
        "agui": os.environ.get("AGUI_RATE") or "120/min",
        "auth_failures": os.environ.get("API_AUTH_FAILURE_RATE") or "20/min",
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Countersign API",
    "DESCRIPTION": "Threads, runs, tool calls and the approval queue. Authenticate "
    "with `Authorization: Token <key>` (create one with `manage.py createtoken "
    "<username>` or in the admin). Every 4xx answers "
    '`{"type", "detail", "fields"?}`.',
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # The docs page loads Swagger UI from drf-spectacular-sidecar's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Countersign's own settings; read lazily through core.conf.countersign_settings.
COUNTERSIGN: dict[str, object] = {
    "JANITOR_INTERVAL_SECONDS": _JANITOR_INTERVAL,
    # The demo's refund policy: more than 100.00 is high risk on the cards.
    "RISK_THRESHOLDS": {"refund_order": {"amount": 100}},
}
# The recovery windows (core.conf documents each), settable per process by
# environment, e.g. COUNTERSIGN_RUN_STALE_SECONDS=60; checked by threads.checks.
for _name in (
    "EXECUTION_LEASE_GRACE_SECONDS",
    "RUN_HEARTBEAT_SECONDS",
    "RUN_STALE_SECONDS",
    "QUEUED_STALE_SECONDS",
    "RUN_RETRY_ATTEMPTS",
    "RUN_RETRY_BACKOFF_SECONDS",
    "DECISION_UNDO_SECONDS",
    # notification retries and thresholds (docs/notifications.md)
    "NOTIFY_EXPIRING_SECONDS",
    "NOTIFY_MAX_ATTEMPTS",
    "NOTIFY_RETRY_BACKOFF_SECONDS",
    "NOTIFY_RETRY_MAX_DELAY_SECONDS",
    "NOTIFY_TIMEOUT_SECONDS",
):
    if os.environ.get(f"COUNTERSIGN_{_name}"):
        COUNTERSIGN[_name] = float(os.environ[f"COUNTERSIGN_{_name}"])

# Outbound notifications (docs/notifications.md): targets as JSON, e.g.
# COUNTERSIGN_NOTIFICATIONS_JSON='[{"name": "ops", "kind": "email", "to": ["ops@example.com"]}]',
# and the site's public address for the signed links they carry.
if os.environ.get("COUNTERSIGN_NOTIFICATIONS_JSON"):
    import json as _json

    try:
        COUNTERSIGN["NOTIFICATIONS"] = _json.loads(
            os.environ["COUNTERSIGN_NOTIFICATIONS_JSON"]
        )
    except ValueError:
        # Kept as text, so the system check (approvals.E101) names the problem.
        COUNTERSIGN["NOTIFICATIONS"] = os.environ["COUNTERSIGN_NOTIFICATIONS_JSON"]
# The audit chain's keys, current first (docs/audit.md): COUNTERSIGN_AUDIT_KEYS=id:secret,...
if os.environ.get("COUNTERSIGN_AUDIT_KEYS"):
    COUNTERSIGN["AUDIT_KEYS"] = os.environ["COUNTERSIGN_AUDIT_KEYS"]
if os.environ.get("COUNTERSIGN_METRICS_TOKEN"):
    COUNTERSIGN["METRICS_TOKEN"] = os.environ["COUNTERSIGN_METRICS_TOKEN"]
if os.environ.get("COUNTERSIGN_PUBLIC_URL"):
    COUNTERSIGN["PUBLIC_URL"] = os.environ["COUNTERSIGN_PUBLIC_URL"]

# Email for notifications: Django's SMTP backend, configured by environment.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT") or 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = int(os.environ.get("EMAIL_TIMEOUT") or 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "countersign@localhost")

# The scripted demo agent streams at this many characters per second, so a new user
# sees streaming (0 = instant; the tests set 0).
COUNTERSIGN_DEMO_PACE = float(os.environ.get("COUNTERSIGN_DEMO_PACE") or 60)

# Agent name -> provider, model, system prompt, toolsets and limits. API keys and
# base URLs are read from environment variables only (see agentcore.providers).
COUNTERSIGN_AGENTS = {
    "demo": {
        "provider": "scripted",
        "model": "scripted",
        "system_prompt": "You are Countersign's demo agent.",
        "toolsets": ["demo.tools.DEMO_TOOLS"],
    },
}
if os.environ.get("COUNTERSIGN_AGENTS_JSON"):
    # More agents (or overrides) as a JSON object of the same shape, so web and
    # worker processes are configured alike by environment alone.
    import json as _json

    COUNTERSIGN_AGENTS.update(_json.loads(os.environ["COUNTERSIGN_AGENTS_JSON"]))

# Logging: one JSON object per line in production (``LOG_FORMAT=json``, the default
# when DEBUG=0), tagged with ``run``, ``thread`` and ``toolCallId`` when known
# (core.logging). ``LOG_FORMAT=text`` for a terminal.
LOG_FORMAT = os.environ.get("LOG_FORMAT") or ("text" if DEBUG else "json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "core.logging.ContextFilter"},
        # Credentials in logged URLs (?token=...) are replaced (core.logging).
        "redact": {"()": "core.logging.RedactFilter"},
        # A 4xx is logged as one WARNING line, without a traceback (core.logging).
        "client_errors": {"()": "core.logging.ClientErrorFilter"},
    },
    "formatters": {
        "json": {"()": "core.logging.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["redact", "context"],
            "formatter": "json" if LOG_FORMAT == "json" else "text",
        }
    },
    "loggers": {"django.request": {"filters": ["client_errors"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
# Celery workers log through the same handler (not Celery's own format).
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"

# -- Production hardening ------------------------------------------------------
# Safe defaults whenever DEBUG=0 (``manage.py check --deploy`` passes with them);
# each can be turned off by its environment variable, e.g. to serve plain HTTP on
# 127.0.0.1 (``make prod-like``). Behind a TLS-terminating proxy, run uvicorn with
# ``--proxy-headers`` and FORWARDED_ALLOW_IPS set to the proxy's address.
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", not DEBUG)
# Probes and the Prometheus scraper speak plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = int(
    os.environ.get("SECURE_HSTS_SECONDS") or (0 if DEBUG else 31536000)
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# The "ratelimit" cache holds the rate limits' counters (web.ratelimit): Redis when
# REDIS_URL is set, so every server process counts together; else this process's
# memory. Nothing else is cached.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "ratelimit": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Per deployment (or test session) sharing one Redis, like the
            # channel layer's prefix.
            "KEY_PREFIX": f"{os.environ.get('CHANNEL_LAYER_PREFIX') or 'countersign'}-ratelimit",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if REDIS_URL
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "ratelimit",
        }
    ),
}
