#!/usr/bin/env python3
"""Schemathesis with every check against the live schema of a prod-like stack (``make fuzz``).

Starts the prod-like stack (``scripts/prodlike.py``; ``PORT``, ``PROD_LIKE_DIR``,
``PROD_LIKE_*_URL``), gives the user ``fuzz`` (a superuser) an API token, records a
demo thread waiting for an approval (so happy paths have real objects), and runs
``schemathesis run <stack>/api/schema/ --checks all`` with that token, then stops
the stack. ``FUZZ_EXAMPLES`` (25) examples per operation, ``FUZZ_SECONDS`` (120)
time budget. Exit status: schemathesis's (0 when every check passed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import prodlike  # noqa: E402


def main() -> int:
    # Schemathesis sends ~2,000 requests in two minutes from one token and one
    # address; at the default rates most would be answered 429 and nothing past the
    # throttle would be tested. Every operation still documents its 429.
    for rate in ("API_RATE", "API_MESSAGE_RATE", "AGUI_RATE", "API_AUTH_FAILURE_RATE"):
        os.environ.setdefault(rate, "100000/min")
    if prodlike.start() != 0:
        return 1
    try:
        env = prodlike.stack_env(prodlike.run_dir())
        os.environ.update(env)
        import django

        django.setup()
        from chaos import api_token

        token = api_token("fuzz")
        subprocess.run(
            [sys.executable, "manage.py", "loaddemo", "--user", "fuzz"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        argv = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{env['PROD_LIKE_URL']}/api/schema/",
            "--checks",
            "all",
            "--header",
            f"Authorization: Token {token}",
            "--max-examples",
            os.environ.get("FUZZ_EXAMPLES") or "25",
            "--max-time",
            os.environ.get("FUZZ_SECONDS") or "120",
            # One worker: with two, the coverage phase's ast.parse calls race in
            # CPython 3.11 ("AST constructor recursion depth mismatch").
            "--workers",
            "1",
            "--suppress-health-check",
            "all",
            "--seed",
            os.environ.get("FUZZ_SEED") or "1",
        ]
        print(
            "fuzz:",
            " ".join(
                a if "Token" not in a else "Authorization: Token ***" for a in argv[1:]
            ),
            flush=True,
        )
        return subprocess.run(argv, cwd=ROOT, env=env).returncode
    finally:
        prodlike.stop()


if __name__ == "__main__":
    sys.exit(main())
