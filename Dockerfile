# Countersign: one image for every process (web, worker, beat, migrate).
#   docker build -t countersign .
# Configuration comes from the environment only (see config/settings.py).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md* ./
RUN mkdir -p config agentcore threads approvals demo \
    && touch config/__init__.py agentcore/__init__.py threads/__init__.py \
       approvals/__init__.py demo/__init__.py \
    && pip install . \
    && pip uninstall -y countersign

COPY . .
# PYTHONDONTWRITEBYTECODE (above) keeps processes from writing __pycache__, and
# the app imports from /app: without this every web, worker and beat start would
# compile the whole project from source first (bench B6).
RUN pip install --no-deps . \
    && python -m compileall -q . \
    && useradd --system --uid 10001 --home-dir /app countersign \
    && mkdir -p /tmp/prometheus && chown countersign /tmp/prometheus \
    && DEBUG=0 SECRET_KEY=collectstatic-only STATIC_MANIFEST=1 \
       python manage.py collectstatic --noinput -v 0 \
    && chown -R countersign /app/staticfiles

ENV DEBUG=0 \
    STATIC_MANIFEST=1 \
    LOG_FORMAT=json \
    LOG_LEVEL=INFO \
    PORT=8000

USER countersign
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request as u; u.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\", \"8000\")}/healthz', timeout=4)"

# The web process; docker-compose.yml overrides the command for worker, beat and migrate.
CMD ["sh", "-c", "exec uvicorn config.asgi:application --host 0.0.0.0 --port ${PORT} --ws-per-message-deflate false --proxy-headers --log-config config/uvicorn-logging.json --timeout-graceful-shutdown 20 --workers ${WEB_WORKERS:-2}"]
