"""Kill (or freeze) a test Celery worker at a named crash point (``approvals.crashpoints``).

Loaded by test workers (``celery ... -I tests.crashpoints``, and
``CELERY_IMPORTS`` in ``tests/prod/settings.py``). When the worker's environment
sets ``COUNTERSIGN_TEST_CRASH_AT`` to a crash point name, this module replaces
:func:`approvals.crashpoints.crash_point` so the worker process exits with status
17 there, as a killed worker would: no cleanup, no acknowledgement. With
``COUNTERSIGN_TEST_HANG_AT`` the process stops there instead (sleeps), so a test
can kill the worker's master while its child holds that step. Without either
variable it changes nothing. The environment is read here, in test code, once.
"""

from __future__ import annotations

import os
import time

from approvals import crashpoints

#: The environment variable naming the crash point a test worker dies at.
CRASH_AT_ENV = "COUNTERSIGN_TEST_CRASH_AT"
#: The environment variable naming the crash point a test worker freezes at.
HANG_AT_ENV = "COUNTERSIGN_TEST_HANG_AT"

_crash_at = os.environ.get(CRASH_AT_ENV, "")
_hang_at = os.environ.get(HANG_AT_ENV, "")


def _crash_point(name: crashpoints.CrashPoint) -> None:
    if name == _crash_at:
        os._exit(17)
    if name == _hang_at:
        print(f"crash point {name}: hanging", flush=True)
        time.sleep(3600)


if _crash_at or _hang_at:
    crashpoints.crash_point = _crash_point
