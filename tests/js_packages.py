"""The npm packages the tests use (``tests/js/package.json``), installed once per session.

``npm ci`` installs exactly what ``tests/js/package-lock.json`` pins; it runs only
when ``tests/js/node_modules`` lacks a package the caller needs (a fresh clone,
or a lockfile that gained a package since the last install).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from tests.helpers.services import service_missing

JS_DIR = Path(__file__).resolve().parent / "js"


def ensure_js_package(name: str) -> Path:
    """Return ``tests/js/node_modules/<name>``, running ``npm ci`` first when it is missing.

    ``name`` is an npm package name (``"axe-core"``, ``"@ag-ui/client"``). Skips
    the test (fails it with ``COUNTERSIGN_REQUIRE_SERVICES=1``) when node/npm are
    absent or ``npm ci`` fails.
    """
    package = JS_DIR / "node_modules" / name
    if (package / "package.json").exists():
        return package
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        service_missing(f"node and npm are needed for the npm package {name}")
    # pytest-xdist's workers may ask at once; `npm ci` deletes node_modules first, so
    # one installs while the other waits, then finds the package.
    with open(JS_DIR / ".npm-ci.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (package / "package.json").exists():
            return package
        installed = subprocess.run(
            [str(npm), "ci", "--no-audit", "--no-fund"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
    if installed.returncode != 0:
        service_missing(f"npm ci failed in {JS_DIR}: {installed.stderr[-2000:]}")
    if not (package / "package.json").exists():
        service_missing(f"npm ci in {JS_DIR} did not install {name}")
    return package
