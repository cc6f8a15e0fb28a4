"""B6: cold start.

(a) ``import agentcore`` in a fresh interpreter, and (a') what a run needs (its
loop, stream, tools, events: the AG-UI protocol models among them, so the package's
own lazy ``__init__`` does not hide them): neither may import Django nor a provider
SDK; time vs ``python -c pass``; top 10 import-time offenders of (a') from
``-X importtime``.
(b) uvicorn start to the first 200 of ``/healthz`` (and to the first accepted
WebSocket) vs a bare Django ASGI app with the same third-party apps.
(c) Celery worker start to its first task executed vs a bare Celery app.

    python -m bench.cold_start
"""

from __future__ import annotations

import subprocess
import time
import uuid

from bench.common import (
    PYTHON,
    REDIS_URL,
    ROOT,
    Row,
    bench_env,
    free_port,
    median,
    print_rows,
    save_rows,
    setup_django,
    spawn,
    stop_process,
    wait_http,
)

REPEAT = 5
IMPORT_PACKAGE = "import agentcore"
IMPORT = "import agentcore, agentcore.loop, agentcore.stream, agentcore.tools, agentcore.events"
CHECK = (
    IMPORT
    + "; import sys; bad = [m for m in ('django', 'openai', 'anthropic', 'google.genai') "
    "if m in sys.modules]; assert not bad, bad"
)


def _time_python(code: str) -> float:
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        subprocess.run([PYTHON, "-c", code], cwd=ROOT, check=True)
        samples.append(time.perf_counter() - start)
    return median(samples)


def import_offenders(top: int = 10) -> list[tuple[int, str]]:
    out = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", IMPORT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []
    for line in out.splitlines():
        if line.startswith("import time:") and "|" in line and "self" not in line:
            _, cumulative, name = line[len("import time:") :].split("|")
            rows.append((int(cumulative), name.rstrip()))
    rows.sort(reverse=True)
    return rows[:top]


def server_start(app: str, settings: str) -> float:
    """Seconds from spawning uvicorn to the first 200 of /healthz (median)."""
    samples = []
    for _ in range(3):
        port = free_port()
        start = time.monotonic()
        process, _ = spawn(
            "cold-web",
            [
                PYTHON,
                "-m",
                "uvicorn",
                app,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--ws-per-message-deflate",
                "false",
                "--log-level",
                "warning",
            ],
            bench_env(DJANGO_SETTINGS_MODULE=settings),
        )
        try:
            samples.append(
                wait_http(f"http://127.0.0.1:{port}/healthz", process=process) - start
            )
        finally:
            stop_process(process)
    return median(samples)


def worker_start(app: str, task: str, queue: str, settings: str) -> float:
    """Seconds from spawning a worker (task already queued) to the task running (median)."""
    import redis
    from celery import Celery

    # redis-py 8 reads with a 5 s socket timeout by default, shorter than the
    # BLPOP below: a worker that starts slowly on a loaded machine must not fail it.
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=None)
    sender = Celery(broker=REDIS_URL)
    samples = []
    for _ in range(3):
        key = f"bench:cold:{uuid.uuid4().hex}"
        kwargs = {"key": key} if task == "bare.noop" else {"key": key, "sent": 0.0}
        sender.send_task(task, kwargs=kwargs, queue=queue)
        start_wall = time.time()
        process, _ = spawn(
            "cold-worker",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                app,
                "worker",
                "-Q",
                queue,
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "WARNING",
            ],
            bench_env(DJANGO_SETTINGS_MODULE=settings),
        )
        try:
            item = client.blpop(key, timeout=60)
            if item is None:
                raise TimeoutError(f"{app}: task never ran")
            samples.append(time.time() - start_wall)
        finally:
            stop_process(process)
    return median(samples)


def compile_sources() -> None:
    """Write the bytecode of the project's modules, as a deployed image holds it.

    With ``PYTHONDONTWRITEBYTECODE`` set (the Dockerfile sets it) no process
    writes ``__pycache__``: every start would compile the project's sources and
    B6 would time the compiler, not the imports. ``compileall`` writes regardless.
    """
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "-x", r"/(\.venv|node_modules)/", "."],
        cwd=ROOT,
        check=True,
    )


def main() -> list[Row]:
    setup_django()
    compile_sources()
    subprocess.run(
        [PYTHON, "-c", CHECK], cwd=ROOT, check=True
    )  # raises if Django/SDK leak in
    ours_package = _time_python(IMPORT_PACKAGE) * 1000
    ours_import = _time_python(IMPORT) * 1000
    bare_python = _time_python("pass") * 1000
    offenders = import_offenders()
    print("B6 top import-time offenders (cumulative us):")
    for cumulative, name in offenders:
        print(f"    {cumulative:>8}  {name}")
    ours_http = server_start("config.asgi:application", "bench.settings")
    bare_http = server_start("bench.bare.asgi:application", "bench.bare.settings")
    ours_worker = worker_start(
        "config", "bench.tasks.noop", "bench-cold", "bench.settings"
    )
    bare_worker = worker_start(
        "bench.bare.celery_app", "bare.noop", "bare", "bench.bare.settings"
    )
    return [
        Row(
            "B6",
            "import agentcore (no Django, no SDK): ms",
            ours_package,
            bare_python,
            "ms",
            ratio=None,
            target="<= 100 ms over python -c pass",
            note=f"+{ours_package - bare_python:.0f} ms over bare python",
        ),
        Row(
            "B6",
            "import a run's agentcore (loop, stream, tools, events): ms",
            ours_import,
            bare_python,
            "ms",
            ratio=None,
            target="<= 150 ms over python -c pass",
            note=f"+{ours_import - bare_python:.0f} ms over bare python",
        ),
        Row(
            "B6",
            "uvicorn start -> first 200 /healthz",
            ours_http * 1000,
            bare_http * 1000,
            "ms",
            target="<= 1.5x bare Django ASGI",
        ),
        Row(
            "B6",
            "celery worker start -> first task run",
            ours_worker * 1000,
            bare_worker * 1000,
            "ms",
            target="<= 1.3x bare Celery app",
        ),
    ]


if __name__ == "__main__":
    rows = main()
    print_rows(rows)
    save_rows("cold_start", rows)
