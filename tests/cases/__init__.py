"""Real-world failure cases (a copy of the project's ``shared/cases/tool-calling.jsonl``).

Each case becomes at least one test named by its id; :func:`load_case` gives a test
the case's ``input`` and ``expected`` values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CASES_FILE = Path(__file__).with_name("tool-calling.jsonl")


def load_case(case_id: str) -> dict[str, Any]:
    """Return the case ``case_id`` (``{"id", "kind", "symptom", "input", "expected"}``)."""
    with CASES_FILE.open(encoding="utf-8") as fh:
        for line in fh:
            case = json.loads(line)
            if case["id"] == case_id:
                return case
    raise LookupError(f"no case {case_id!r} in {CASES_FILE}")
