"""The code's shape: layers point one way, and statuses have one owner each.

Read the source as a newcomer would (``docs/architecture.md``): these tests walk
the project's modules with :mod:`ast`, so a shortcut that breaks the design fails
here instead of in review.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "core",
    "agentcore",
    "threads",
    "approvals",
    "orchestration",
    "web",
    "demo",
    "config",
)

#: The layers, bottom up (DESIGN.md "Layout"): a package imports only packages of
#: a lower rank. ``core`` (settings access, base errors, shared types) and
#: ``agentcore`` (no Django) are both at the bottom and import no project package;
#: ``demo`` is an example toolset that only ``config`` names; ``config`` (settings,
#: the root URL conf, the ASGI and Celery apps) wires everything together.
RANKS = {
    "core": 0,
    "agentcore": 0,
    "demo": 1,
    "threads": 1,
    "approvals": 2,
    "orchestration": 3,
    "web": 4,
    "config": 5,
}

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


def _local_task_imports(tree: ast.Module) -> set[int]:
    """Return the ids of import nodes inside functions that import a ``tasks`` module.

    Sending a Celery task is sending a message: the sender names the task (it
    imports the task object where it sends it, STYLE.md 5), and depends on its
    name and arguments, not on the layer its body calls. Such an import, local
    to a function, is no edge of the import graph; one at module level is.
    """
    found: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(
                ".tasks"
            ):
                found.add(id(node))
    return found


def _imports(module: str, path: Path) -> Iterator[str]:
    """Yield the project modules ``module`` imports, at any depth of its code.

    A task object imported inside a function to send it is not counted
    (:func:`_local_task_imports`).
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    sends = _local_task_imports(tree)
    for node in ast.walk(tree):
        if id(node) in sends:
            continue
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


def _package(module: str) -> str:
    return module.split(".")[0]


#: Modules that Django's and Celery's conventions keep in their app although they
#: are shells (``admin.autodiscover`` imports ``<app>.admin``, ``manage.py`` finds
#: ``<app>/management/commands``; a task's registered name is its module path): they may call down to ``orchestration``, not to ``web``.
SHELL_MODULE_NAMES = frozenset({"admin", "tasks"})


def _rank(module: str) -> int:
    if (
        module.rpartition(".")[2] in SHELL_MODULE_NAMES
        or ".management.commands." in module
    ):
        return RANKS["orchestration"] + 1
    return RANKS[_package(module)]


def test_packages_import_only_lower_layers() -> None:
    """Every import between packages points down: core/agentcore <- threads <- approvals
    <- orchestration <- web <- config, with no module allowlist (DESIGN.md "Layout").

    An app's ``admin``, ``tasks`` and management commands are shells by convention: they may
    call ``orchestration``, never ``web``."""
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _package(target) != _package(module)
        and RANKS[_package(target)] >= _rank(module)
    )
    assert upward == []


def test_every_module_belongs_to_a_ranked_package() -> None:
    """A new top-level package gets a place in the layers before it gets code."""
    assert sorted({_package(m) for m in MODULES} - set(RANKS)) == []


def _public_modules(package: str) -> frozenset[str]:
    return frozenset(getattr(importlib.import_module(package), "PUBLIC_MODULES", ()))


#: The domain packages, each declaring its public surface in its ``__init__``.
DOMAIN_PACKAGES = ("core", "threads", "approvals", "orchestration")


@pytest.mark.parametrize("package", DOMAIN_PACKAGES)
def test_domain_packages_declare_their_public_surface(package: str) -> None:
    """Each domain package lists the modules other packages may import, and they exist."""
    public = _public_modules(package)
    assert public, f"{package}/__init__.py declares no PUBLIC_MODULES"
    assert sorted(m for m in public if m not in MODULES) == []


def _cross_package_imports() -> Iterator[tuple[str, str, str]]:
    """Yield ``(importer, module, name)`` for each ``from X import name`` across packages."""
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    anchor = parts[: len(parts) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    target = candidate if candidate in MODULES else base
                    if target in MODULES and _package(target) != _package(module):
                        yield module, target, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in MODULES and _package(alias.name) != _package(
                        module
                    ):
                        yield module, alias.name, ""


def test_other_packages_import_only_the_public_surface() -> None:
    """Across packages, only a domain package's public modules are imported, and no
    private name (one starting with ``_``) of any module."""
    public = {p: _public_modules(p) for p in DOMAIN_PACKAGES}
    offenders = sorted(
        f"{importer} imports {target}" + (f".{name}" if name else "")
        for importer, target, name in _cross_package_imports()
        if (
            _package(target) in public
            and target not in public[_package(target)]
            and target != _package(target)
        )
        or name.startswith("_")
    )
    assert offenders == []


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


def test_importing_a_runs_agentcore_builds_no_protocol_model() -> None:
    """The ``ag_ui`` models (and pydantic) are built on first use, not at import (B6)."""
    run_modules = (
        "import agentcore.loop, agentcore.stream, agentcore.tools, agentcore.events, "
        "agentcore.mcp"
    )
    assert _imported_after(run_modules, ("ag_ui.core", "pydantic")) == []


def test_web_url_conf_imports_no_provider_sdk_and_no_celery() -> None:
    """Django set up plus the URL conf (a web process's first request) imports no SDK.

    Celery too is imported only when a task is sent (threads.execution.celery_app),
    and the worker's task modules import their services in their bodies (B6).
    """
    code = "import django; django.setup(); import config.urls"
    assert _imported_after(code, (*PROVIDER_SDKS, "celery")) == []
    boot = (
        "import config.celery, django; django.setup(); "
        "import threads.tasks, approvals.tasks, orchestration.tasks"
    )
    assert (
        _imported_after(
            boot,
            ("orchestration.runs", "orchestration.pipeline", "httpx", "config.urls"),
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


def _calls_of(name: str) -> Iterator[str]:
    """Yield ``module:line`` for every call of a function called ``name``."""
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if called == name:
                yield f"{module}:{node.lineno}"


def test_continuation_has_one_caller() -> None:
    """The run continues from one place: the pipeline's last step.

    Domain services say what they did; only ``orchestration.pipeline.run_continue``
    starts the next run (``docs/architecture.md``, "The life of a tool call").
    """
    callers = [c.split(":")[0] for c in _calls_of("continuation_maybe_start")]
    assert callers == ["orchestration.pipeline"]


def _asyncio_runs(module: str) -> list[int]:
    tree = ast.parse(MODULES[module].read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "asyncio"
    ]


def test_domain_packages_never_run_an_event_loop() -> None:
    """No module of ``threads`` or ``approvals`` calls ``asyncio.run``.

    Running a tool (or anything async) from sync code is the orchestration
    layer's (``orchestration.pipeline.tool_run``); a domain service stays sync.
    """
    found = {
        module: lines
        for module in MODULES
        if module.split(".")[0] in {"threads", "approvals"}
        and (lines := _asyncio_runs(module))
    }
    assert found == {}
    assert _asyncio_runs("orchestration.pipeline")  # the check sees the real one


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
