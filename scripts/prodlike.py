#!/usr/bin/env python3
"""Run Countersign's production processes locally, against this machine's services.

    python scripts/prodlike.py start   # migrate, collectstatic, first user, web + 2 workers + beat
    python scripts/prodlike.py stop    # SIGTERM (warm shutdown), SIGKILL after a timeout
    python scripts/prodlike.py status  # each process: pid, alive, health (exit 1 if unhealthy)
    python scripts/prodlike.py smoke   # start, run tests/prod/smoke.py, stop

The same commands as ``docker-compose.yml``, with ``DEBUG=0`` and the production
settings, except the explicit choices that let it serve plain HTTP on 127.0.0.1
(no SSL redirect, no secure-only cookies, no HSTS). Processes run in the
background in their own sessions; pid files, logs (JSON lines), a generated
``SECRET_KEY`` and the stack's environment (``env.json``, ``env.sh``) live in the
run directory, and ``start`` prints where.

Environment: ``PORT`` (8100), ``PROD_LIKE_DIR`` (``/tmp/countersign-prod-like``),
the database ``PROD_LIKE_DATABASE_URL``, else ``DATABASE_URL``, else
``postgres://postgres@127.0.0.1:5432/countersign_prodlike`` (PostgreSQL only; created
if missing), Redis ``PROD_LIKE_REDIS_URL``, else ``REDIS_URL``, else
``redis://127.0.0.1:6379/13``, ``PROD_LIKE_WORKERS`` (2), ``CELERY_CONCURRENCY`` (2
per worker). ``start`` creates the superuser ``admin`` (its password printed once)
unless it exists.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def run_dir() -> Path:
    return Path(os.environ.get("PROD_LIKE_DIR") or "/tmp/countersign-prod-like")


def port() -> int:
    return int(os.environ.get("PORT") or 8100)


def _secret_key(directory: Path) -> str:
    path = directory / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/countersign_prodlike"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"


def database_url() -> str:
    """Return the stack's database: ``PROD_LIKE_DATABASE_URL``, ``DATABASE_URL``, the default."""
    return (
        os.environ.get("PROD_LIKE_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or DEFAULT_DATABASE_URL
    )


def redis_url() -> str:
    """Return the stack's Redis: ``PROD_LIKE_REDIS_URL``, ``REDIS_URL``, the default."""
    return (
        os.environ.get("PROD_LIKE_REDIS_URL")
        or os.environ.get("REDIS_URL")
        or DEFAULT_REDIS_URL
    )


def stack_env(directory: Path) -> dict[str, str]:
    """Return the environment every process of the stack gets."""
    origin = f"http://127.0.0.1:{port()}"
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL"}
        },
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "0",
        "SECRET_KEY": _secret_key(directory),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": f"{origin},http://localhost:{port()}",
        # Explicit choices for plain HTTP on loopback (production defaults are on).
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "DATABASE_URL": database_url(),
        "REDIS_URL": redis_url(),
        "CHANNEL_LAYER_PREFIX": "prodlike",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": os.environ.get("LOG_LEVEL") or "INFO",
        "STATIC_ROOT": str(directory / "static"),
        "PYTHONUNBUFFERED": "1",
        "PROD_LIKE_URL": origin,
        # The smoke test, chaos run and benchmarks want the demo agent instant.
        "COUNTERSIGN_DEMO_PACE": os.environ.get("COUNTERSIGN_DEMO_PACE") or "0",
    }


ENV_KEYS = (
    "DJANGO_SETTINGS_MODULE",
    "DEBUG",
    "DATABASE_URL",
    "REDIS_URL",
    "PROD_LIKE_URL",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "CHANNEL_LAYER_PREFIX",
    "STATIC_ROOT",
)


def write_environment(directory: Path, env: dict[str, str]) -> None:
    """Write the stack's settings to ``env.json`` and a sourceable ``env.sh`` (mode 600)."""
    chosen = {k: env[k] for k in ENV_KEYS}
    (directory / "env.json").write_text(json.dumps(chosen, indent=1))
    (directory / "env.sh").write_text(
        "# Source this to run manage.py against the prod-like stack.\n"
        + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in chosen.items())
    )
    for name in ("env.json", "env.sh"):
        (directory / name).chmod(0o600)


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database named by ``url`` if it does not exist."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres"):
        return
    import psycopg

    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def commands() -> dict[str, list[str]]:
    """Return the stack's processes: name -> argv (the same as docker-compose.yml)."""
    workers = int(os.environ.get("PROD_LIKE_WORKERS") or 2)
    concurrency = os.environ.get("CELERY_CONCURRENCY") or "2"
    procs = {
        "web": [
            PYTHON,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port()),
            "--ws-per-message-deflate",
            "false",
            "--log-config",
            str(ROOT / "config" / "uvicorn-logging.json"),
            "--timeout-graceful-shutdown",
            "20",
        ],
    }
    for index in range(1, workers + 1):
        procs[f"worker{index}"] = [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            "runs,tools,countersign",
            "--pool",
            "prefork",
            "-c",
            concurrency,
            "-n",
            f"prodlike{index}@%h",
            "-l",
            "INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    procs["beat"] = [
        PYTHON,
        "-m",
        "celery",
        "-A",
        "config",
        "beat",
        "-l",
        "INFO",
        "-s",
        str(run_dir() / "celerybeat-schedule"),
        "--pidfile",
        str(run_dir() / "celerybeat.pid"),
    ]
    return procs


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(pid: int) -> bool:
    """Whether ``pid`` is still a process this stack started (pid reuse guard)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"config" in cmdline and (b"uvicorn" in cmdline or b"celery" in cmdline)


def _pids(directory: Path) -> dict[str, int]:
    found = {}
    for path in sorted(directory.glob("*.pid")):
        if path.name == "celerybeat.pid":
            continue
        try:
            found[path.stem] = int(path.read_text().strip())
        except ValueError:
            path.unlink()
    return found


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def wait_healthy(url: str, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                health: dict[str, object] = json.loads(response.read())
                return health
        except (urllib.error.URLError, OSError) as error:
            last = error
        time.sleep(0.2)
    raise SystemExit(f"prod-like: /healthz not 200 after {timeout}s ({last})")


def _wait_log(path: Path, needle: bytes, timeout: float, pid: int) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in path.read_bytes():
            return
        if not _alive(pid):
            raise SystemExit(f"prod-like: {path.stem} exited; see {path}")
        time.sleep(0.2)
    raise SystemExit(f"prod-like: {path.stem} not ready after {timeout}s; see {path}")


def spawn(
    directory: Path, name: str, argv: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start process ``name`` in its own session, appending to ``<name>.log``.

    Writes ``<name>.pid``; used by ``start`` and by ``scripts/chaos.py`` to bring
    a killed worker back the way the stack started it.
    """
    log = open(directory / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    (directory / f"{name}.pid").write_text(str(process.pid))
    return process


def start() -> int:
    directory = run_dir()
    directory.mkdir(parents=True, exist_ok=True)
    running = {n: p for n, p in _pids(directory).items() if _alive(p) and _ours(p)}
    if running:
        print(f"prod-like: already running {running}; run 'make prod-like-stop' first")
        return 1
    env = stack_env(directory)
    if not urlsplit(env["DATABASE_URL"]).scheme.startswith("postgres"):
        print(
            f"prod-like: {env['DATABASE_URL']!r} is not PostgreSQL; the stack's processes "
            "write at once and need it (set PROD_LIKE_DATABASE_URL=postgres://...)"
        )
        return 2
    print(f"prod-like: database {_redacted(env['DATABASE_URL'])}")
    print(f"prod-like: redis    {_redacted(env['REDIS_URL'])}")
    ensure_database(env["DATABASE_URL"])
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "collectstatic", "--noinput", "-v", "0")
    # The first user: created with a password printed once, or reported as existing.
    _manage(env, "ensureadmin")
    write_environment(directory, env)
    started = {}
    for name, argv in commands().items():
        started[name] = spawn(directory, name, argv, env).pid
    health = wait_healthy(env["PROD_LIKE_URL"], timeout=60)
    for name, pid in started.items():
        if name.startswith("worker"):
            _wait_log(directory / f"{name}.log", b" ready.", 60, pid)
    print(f"prod-like: {env['PROD_LIKE_URL']} healthz={health}")
    print(f"prod-like: pids {started}")
    print(f"prod-like: logs (JSON lines)   {directory}/<process>.log")
    print(f"prod-like: pid files            {directory}/<process>.pid")
    print(
        f"prod-like: environment          {directory}/env.json, {directory}/env.sh "
        f"(e.g. . {directory}/env.sh && .venv/bin/python manage.py createtoken admin)"
    )
    print("prod-like: status: make prod-like-status; stop: make prod-like-stop")
    return 0


def stop(timeout: float = 60.0) -> int:
    directory = run_dir()
    pids = _pids(directory)
    # Web first (no new work), then workers (warm shutdown finishes current tasks), then beat.
    order = sorted(pids, key=lambda n: (n != "web", n == "beat", n))
    for name in order:
        pid = pids[name]
        if _alive(pid) and _ours(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for name in order:
        pid = pids[name]
        while _alive(pid) and _ours(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid) and _ours(pid):
            print(
                f"prod-like: {name} ({pid}) ignored SIGTERM for {timeout}s; killing it"
            )
            os.killpg(pid, signal.SIGKILL)
        (directory / f"{name}.pid").unlink(missing_ok=True)
    print(f"prod-like: stopped {sorted(pids) or 'nothing'}")
    return 0


def _web_health(url: str) -> str:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=3) as response:
            return f"healthy {json.loads(response.read())}"
    except urllib.error.HTTPError as error:
        return f"UNHEALTHY: /healthz answered {error.code} {error.read()[:200]!r}"
    except (urllib.error.URLError, OSError) as error:
        return f"UNHEALTHY: /healthz unreachable ({error})"


def _worker_replies(env: dict[str, str]) -> dict[str, str]:
    """Ping every worker over the broker; return ``{node name: reply}``."""
    result = subprocess.run(
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "config",
            "inspect",
            "ping",
            "--json",
            "--timeout",
            "3",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        replies = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {}
    return {node: str(reply) for node, reply in replies.items()}


def status() -> int:
    """Print each process (pid, alive, health); return 0 when all are healthy, else 1."""
    directory = run_dir()
    pids = _pids(directory)
    if not pids:
        print(f"prod-like: nothing started from {directory}")
        return 1
    env_file = directory / "env.json"
    env = (
        {**os.environ, **json.loads(env_file.read_text())} if env_file.exists() else {}
    )
    alive = {n: _alive(p) and _ours(p) for n, p in pids.items()}
    replies = _worker_replies(env) if env and any(alive.values()) else {}
    healthy = True
    for name, pid in pids.items():
        if not alive[name]:
            health = "GONE"
        elif name == "web":
            health = _web_health(env.get("PROD_LIKE_URL", f"http://127.0.0.1:{port()}"))
        elif name.startswith("worker"):
            node = next(
                (n for n in replies if n.startswith(f"prodlike{name[6:]}@")), None
            )
            health = (
                f"healthy (ping {node}: {replies[node]})"
                if node
                else "UNHEALTHY: no answer to a broker ping within 3 s"
            )
        else:
            log = directory / f"{name}.log"
            age = time.time() - log.stat().st_mtime if log.exists() else float("inf")
            health = f"running (log written {age:.0f} s ago)"
        healthy = healthy and not health.startswith(("GONE", "UNHEALTHY"))
        print(f"{name:8} pid {pid:<7} {health}")
    print(f"logs: {directory}/<process>.log  environment: {env_file}")
    return 0 if healthy else 1


def smoke() -> int:
    code = start()
    if code:
        return code
    try:
        env = {**stack_env(run_dir()), "PROD_LIKE_DIR": str(run_dir())}
        result = subprocess.run(
            [PYTHON, str(ROOT / "tests" / "prod" / "smoke.py")], cwd=ROOT, env=env
        )
        return result.returncode
    finally:
        stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop", "status", "smoke"])
    action = parser.parse_args().action
    return {"start": start, "stop": stop, "status": status, "smoke": smoke}[action]()


if __name__ == "__main__":
    sys.exit(main())
