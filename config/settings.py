"""Countersign settings: one module, driven by environment variables.

Environment:

- ``DATABASE_URL``: any dj-database-url URL; default SQLite in the project folder.
- ``REDIS_URL``: when set, Celery workers (broker) and the Redis channel layer are
  used; when unset, the embedded default runs runs and executions on a thread pool
  in the server process and uses the in-memory channel layer.
- ``SECRET_KEY``, ``DEBUG`` (``1``/``0``), ``ALLOWED_HOSTS`` (comma-separated),
  ``CSRF_TRUSTED_ORIGINS`` (comma-separated).
- Provider keys (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``) and
  base URLs are read only by the agent configuration in ``COUNTERSIGN_AGENTS``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = _env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "insecure-dev-key-set-SECRET_KEY-in-production" if DEBUG else ""
)
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
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
    "channels",
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
    "threads.middleware.ContentSecurityPolicyMiddleware",
]

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
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "test-db.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = DEBUG

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: used when REDIS_URL is set; the embedded default runs tasks on a thread
# pool in the server process instead (threads.execution).
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
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 600}
CELERY_TASK_DEFAULT_QUEUE = "countersign"
CELERY_TASK_ROUTES = {
    "threads.tasks.run_agent": {"queue": "runs"},
    "approvals.tasks.execute_tool_call": {"queue": "tools"},
    "approvals.tasks.*": {"queue": "tools"},
}
CELERY_BEAT_SCHEDULE = {
    "expire-approvals": {"task": "approvals.tasks.expire_approvals", "schedule": 30.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Countersign API",
    "DESCRIPTION": "Threads, runs, tool calls and the approval queue.",
    "VERSION": "0.1.0",
}

# Countersign's own settings; read lazily through threads.conf.countersign_settings.
COUNTERSIGN: dict[str, object] = {}

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
