"""The code's shape: layers point one way, and statuses have one owner each.

Read the source as a newcomer would (``docs/architecture.md``): these tests walk
the project's modules with :mod:`ast`, so a shortcut that breaks the design fails
here instead of in review.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentcore", "threads", "approvals", "orchestration", "demo", "config")

#: Modules of ``threads`` that are its domain (not shells): they never reach up.
THREADS_DOMAIN = frozenset(
    {
        "threads.agent_config",
        "threads.answers",
        "threads.conf",
        "threads.eventlog",
        "threads.exceptions",
        "threads.execution",
        "threads.idempotency",
        "threads.locks",
        "threads.models",
        "threads.projection",
        "threads.realtime",
        "threads.recording",
        "threads.selectors",
        "threads.services",
        "threads.transitions",
        "threads.validation",
    }
)

#: Status fields and the only modules that assign them (STYLE.md 8).
STATUS_FIELDS = frozenset({"status", "state", "wire_state"})
TRANSITION_MODULES = frozenset({"threads.transitions", "approvals.transitions"})
#: ``Thread.state`` is AG-UI shared state, not a status; ``Thread.replace_state``
#: in the models module is its one writer.
SHARED_STATE_WRITERS = frozenset({"threads.models"})


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[str]:
    """Yield the project modules ``module`` imports, at any depth of its code."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield from _resolve(candidate if candidate in MODULES else base)


def _resolve(name: str) -> Iterator[str]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name:
        yield name


GRAPH = {m: set(_imports(m, p)) - {m} for m, p in MODULES.items()}


def _closure(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in GRAPH[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_import_graph_has_no_cycle() -> None:
    """No module reaches itself through imports, local imports included."""
    cycles = sorted(m for m in GRAPH if m in _closure(m))
    assert cycles == []


def test_threads_domain_never_reaches_approvals_or_orchestration() -> None:
    """The domain modules of ``threads`` never import ``approvals`` or ``orchestration``."""
    upward = {
        module: sorted(
            t
            for t in _closure(module)
            if t.split(".")[0] in {"approvals", "orchestration"}
        )
        for module in sorted(THREADS_DOMAIN)
    }
    assert {m: found for m, found in upward.items() if found} == {}


#: Shells (STYLE.md 3): they may import any layer.
SHELLS = frozenset(
    {"approvals.tasks", "approvals.admin", "approvals.api", "threads.tasks"}
)


def test_approvals_domain_never_imports_orchestration() -> None:
    """``approvals`` sits below ``orchestration``; only its shells (tasks) call up."""
    upward = {
        module: sorted(t for t in targets if t.startswith("orchestration"))
        for module, targets in GRAPH.items()
        if module.startswith("approvals") and module not in SHELLS
    }
    assert {m: found for m, found in upward.items() if found} == {}


def test_agentcore_imports_no_django_and_no_app() -> None:
    """``agentcore`` is the bottom layer: no Django, no project app (DESIGN.md)."""
    offenders: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if not module.startswith("agentcore"):
            continue
        tree = ast.parse(path.read_text())
        names = [
            alias.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import)
            for alias in n.names
        ] + [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        bad = sorted(
            n
            for n in names
            if n.split(".")[0]
            in {
                "django",
                "rest_framework",
                "channels",
                "threads",
                "approvals",
                "orchestration",
            }
        )
        if bad:
            offenders[module] = bad
    assert offenders == {}


#: Provider SDKs: imported by their adapter on first use only (agentcore.providers.registry).
PROVIDER_SDKS = ("openai", "anthropic", "google.genai")


def _imported_after(code: str, candidates: tuple[str, ...]) -> list[str]:
    """Run ``code`` in a fresh interpreter; return which of ``candidates`` it imported."""
    probe = (
        f"{code}\nimport sys\n"
        f"print(','.join(m for m in {candidates!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [m for m in out.strip().split(",") if m]


def test_importing_agentcore_imports_no_django_and_no_provider_sdk() -> None:
    """``import agentcore`` and what a run needs import no Django and no provider SDK (B6)."""
    assert _imported_after("import agentcore", ("django", *PROVIDER_SDKS)) == []
    run_modules = (
        "import agentcore.loop, agentcore.stream, agentcore.tools, agentcore.events, "
        "agentcore.mcp"
    )
    assert _imported_after(run_modules, ("django", *PROVIDER_SDKS)) == []


def test_web_url_conf_imports_no_provider_sdk_and_no_celery() -> None:
    """Django set up plus the URL conf (a web process's first request) imports no SDK.

    Celery too is imported only when a task is sent (threads.execution.celery_task),
    and the worker's task modules import their services in their bodies (B6).
    """
    code = "import django; django.setup(); import config.urls"
    assert _imported_after(code, (*PROVIDER_SDKS, "celery")) == []
    boot = (
        "import config.celery, django; django.setup(); "
        "import threads.tasks, approvals.tasks, threads.janitor"
    )
    assert (
        _imported_after(
            boot,
            ("orchestration.runs", "orchestration.executions", "httpx", "config.urls"),
        )
        == []
    )


def _status_writes(module: str, path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in STATUS_FIELDS:
                yield f"{module}:{node.lineno} assigns .{target.attr}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"update", "bulk_update"}
        ):
            for keyword in node.keywords:
                if keyword.arg in STATUS_FIELDS:
                    yield f"{module}:{node.lineno} .update({keyword.arg}=...)"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in STATUS_FIELDS
        ):
            yield f"{module}:{node.lineno} setattr(..., {node.args[1].value!r})"


@pytest.mark.parametrize(
    "package", ["threads", "approvals", "orchestration", "demo", "config"]
)
def test_only_transition_functions_assign_status_fields(package: str) -> None:
    """``Run.status``, ``Run.wire_state``, ``ToolCall.state``, ``ApprovalRequest.status``
    and ``ToolExecution.state`` are assigned only in ``threads.transitions`` and
    ``approvals.transitions`` (STYLE.md 8)."""
    writes = [
        write
        for module, path in MODULES.items()
        if module.split(".")[0] == package
        and module not in TRANSITION_MODULES | SHARED_STATE_WRITERS
        for write in _status_writes(module, path)
    ]
    assert writes == []


def test_shared_state_writer_assigns_only_thread_state() -> None:
    """The models module writes ``.state`` only inside ``Thread.replace_state``."""
    tree = ast.parse(MODULES["threads.models"].read_text())
    owners = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for func in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            if list(_status_writes_in(func)):
                owners.append(f"{cls.name}.{func.name}")
    assert owners == ["Thread.replace_state"]


def _status_writes_in(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.walk(node):
        if isinstance(child, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr in STATUS_FIELDS
            for t in child.targets
        ):
            yield child


#: The modules that take row locks (``docs/architecture.md``, "Lock order").
LOCK_MODULES = frozenset({"threads.locks", "approvals.locks"})


def test_row_locks_are_taken_only_in_the_lock_modules() -> None:
    """``select_for_update`` appears only in the lock modules."""
    found = sorted(
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if module not in LOCK_MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "select_for_update"
    )
    assert found == []


#: The one writer of the event log (``docs/architecture.md``, "One path for every event").
EVENT_LOG_WRITER = "threads.eventlog"
_INSERTS = frozenset({"create", "bulk_create", "get_or_create", "update_or_create"})


def _event_log_writes(module: str, path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"Event", "thread_seq_advance"}:
            yield f"{module}:{node.lineno} {func.id}(...)"
        elif isinstance(func, ast.Attribute) and func.attr in _INSERTS:
            manager = func.value
            if (
                isinstance(manager, ast.Attribute)
                and manager.attr == "objects"
                and isinstance(manager.value, ast.Name)
                and manager.value.id == "Event"
            ) or (isinstance(manager, ast.Attribute) and manager.attr == "events"):
                yield f"{module}:{node.lineno} .{func.attr}(...)"


def test_only_the_log_writer_appends_events() -> None:
    """``Event`` rows are made, inserted and given a ``seq`` only in ``threads.eventlog``.

    Agent events and Countersign's own facts reach the log through its
    ``log_append`` alike: no other module builds an ``Event``, calls
    ``Event.objects.create``/``bulk_create`` (or a thread's ``events`` manager), or
    advances a thread's ``next_seq``.
    """
    writes = [
        write
        for module, path in MODULES.items()
        if module != EVENT_LOG_WRITER
        for write in _event_log_writes(module, path)
    ]
    assert writes == []
    assert list(_event_log_writes(EVENT_LOG_WRITER, MODULES[EVENT_LOG_WRITER]))
