"""The OpenAI Agents SDK adapter without a server, against the real SDK in ``.venv-oai``.

Malformed model arguments are declared as an object an approver can read (not a
crashed run), and a wrapped tool never runs a call Countersign did not approve.
"""

from __future__ import annotations

from tests.helpers.external import openai_agents_script


def test_malformed_arguments_are_declared_and_an_unapproved_call_never_runs() -> None:
    """Non-JSON, non-object and empty arguments; an invocation no gate claimed."""
    report = openai_agents_script("-", "-", "-", "{}", "--offline")
    assert report["declared"] == {
        "not json": {"arguments": "not json"},
        "[1, 2]": {"arguments": [1, 2]},
        "": {},
        '"text"': {"arguments": "text"},
        '{"order_id": "A"}': {"order_id": "A"},
    }
    assert report["ran"] == []
    assert report["refused"] == (
        "Countersign has not approved refund call call-x for this process; "
        "it did not run."
    )
