"""agentcore.events: the official AG-UI models, resolved on first use (B6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ag_ui.core
import pydantic
import pytest

from agentcore import events as agui

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_the_official_models():
    """Every exported protocol name is the ``ag_ui.core`` object of that name."""
    protocol = [name for name in agui.__all__ if name[0].isupper()]

    differing = [
        name
        for name in protocol
        if name not in {"EventEncoder", "ValidationError"}
        and getattr(agui, name) is not getattr(ag_ui.core, name)
    ]

    assert differing == []
    assert agui.ValidationError is pydantic.ValidationError
    assert agui.PROTOCOL_VERSION == ag_ui.core.PROTOCOL_VERSION


def test_an_unknown_name_is_an_attribute_error():
    """A name the module does not export raises AttributeError naming it."""
    with pytest.raises(AttributeError) as missing:
        _ = agui.NoSuchEvent  # type: ignore[attr-defined]

    assert (
        str(missing.value) == "module 'agentcore.events' has no attribute 'NoSuchEvent'"
    )


def test_parsing_an_event_builds_the_models_on_first_use():
    """A fresh interpreter imports no model until an event is parsed, then parses it."""
    probe = (
        "import sys\n"
        "from agentcore import events\n"
        "before = 'ag_ui.core' in sys.modules\n"
        "event = events.event_from_dict("
        "{'type': 'RUN_STARTED', 'threadId': 't', 'runId': 'r'})\n"
        "print(before, type(event).__name__, events.event_to_dict(event))"
    )

    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert out.strip() == (
        "False RunStartedEvent {'type': 'RUN_STARTED', 'threadId': 't', 'runId': 'r'}"
    )
