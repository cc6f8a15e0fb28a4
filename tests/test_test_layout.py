"""The test suite's own layout: shared code in tests/helpers and tests/fixtures, not in tests.

A test module that imports another test module runs the other's tests' imports,
fixtures and module-level state in its own namespace, and couples two files that
change for different reasons; a fixture name defined twice means two things
depending on the directory a test sits in. These checks read the source (no
import), so they cost milliseconds.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _modules() -> dict[str, Path]:
    """Return every Python module under tests/, by dotted name."""
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def _is_conftest(name: str) -> bool:
    return name.rsplit(".", 1)[-1] == "conftest"


def _imported(path: Path) -> set[str]:
    """Return the tests.* modules ``path`` imports, anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            # ``from tests.api import test_threads`` imports a module too.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in MODULES}


def _fixtures(path: Path) -> list[tuple[str, bool, int]]:
    """Return ``(fixture name, autouse, line)`` for each fixture defined in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if ast.unparse(target) not in {"pytest.fixture", "fixture"}:
                continue
            keywords = {k.arg: k.value for k in (call.keywords if call else [])}
            name = keywords.get("name")
            autouse = keywords.get("autouse")
            found.append(
                (
                    name.value if isinstance(name, ast.Constant) else node.name,
                    isinstance(autouse, ast.Constant) and autouse.value is True,
                    node.lineno,
                )
            )
    return found


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    """Shared code lives in tests/helpers or tests/fixtures: no import reaches a test file."""
    offenders = {
        name: sorted(
            other
            for other in _imported(path)
            if _is_test_module(other) or _is_conftest(other)
        )
        for name, path in MODULES.items()
    }
    assert {name: bad for name, bad in offenders.items() if bad} == {}


def test_every_fixture_name_is_defined_once() -> None:
    """One name, one meaning: pytest would silently pick a definition by directory."""
    where: dict[str, list[str]] = defaultdict(list)
    for name, path in MODULES.items():
        for fixture, _, line in _fixtures(path):
            where[fixture].append(f"{name}:{line}")
    assert {f: places for f, places in where.items() if len(places) > 1} == {}


def test_conftest_files_hold_only_autouse_configuration() -> None:
    """A directory's conftest.py configures its directory; shared fixtures are plugins."""
    offenders = {
        name: [fixture for fixture, autouse, _ in _fixtures(path) if not autouse]
        for name, path in MODULES.items()
        if _is_conftest(name)
    }
    assert {name: bad for name, bad in offenders.items() if bad} == {}


def _conftest_value(name: str) -> object:
    """Return the literal assigned to ``name`` at the top of tests/conftest.py."""
    conftest = ast.parse((TESTS / "conftest.py").read_text())
    (value,) = [
        node.value
        for node in conftest.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and node.value is not None
        and ast.unparse(
            node.targets[0] if isinstance(node, ast.Assign) else node.target
        )
        == name
    ]
    return ast.literal_eval(value)


def test_every_fixture_module_is_registered() -> None:
    """Each module of tests/fixtures is listed in ``pytest_plugins`` of tests/conftest.py."""
    fixture_modules = {
        name
        for name in MODULES
        if name.startswith("tests.fixtures.") and name != "tests.fixtures"
    }
    assert fixture_modules == set(_conftest_value("pytest_plugins"))


def test_the_fixtures_that_give_markers_exist() -> None:
    """A renamed fixture would silently stop marking its tests ``integration``."""
    defined = {
        fixture for path in MODULES.values() for fixture, _, _ in _fixtures(path)
    }
    by_fixture = _conftest_value("FIXTURE_MARKS")
    by_param = _conftest_value("PARAM_MARKS")
    assert isinstance(by_fixture, dict)
    assert isinstance(by_param, dict)
    named = set(by_fixture) | {fixture for fixture, _ in by_param}
    assert named - defined == set()
