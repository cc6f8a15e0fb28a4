"""The provider contract run against the scripted provider (STYLE 15).

The scripted provider has no HTTP side, so the ``server`` fixture yields a stand-in
(``server_factory`` below) holding the queued replies, which are scripted turns; each
test's provider plays them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentcore.providers.base import Provider
from agentcore.providers.registry import error_for_status
from agentcore.providers.scripted import (
    ScriptedProvider,
    ScriptedTurn,
    raise_error,
    text,
    tool_call,
)
from tests.agentcore.providers.contract import ProviderContract


@dataclass
class ScriptHolder:
    """Stands in for the HTTP script server: queued replies, no network."""

    replies: list[Any] = field(default_factory=list)
    url: str = "scripted://local"


def _text_reply(pieces: list[str]) -> ScriptedTurn:
    return text("".join(pieces))


def _call_reply(name: str, call_id: str, pieces: list[str]) -> ScriptedTurn:
    return tool_call(name, "".join(pieces), call_id=call_id)


def _error_reply(status: int) -> ScriptedTurn:
    return raise_error(error_for_status(status, provider="scripted"))


class TestScriptedContract(ProviderContract):
    """The scripted provider meets the provider contract."""

    provider_factory = staticmethod(lambda url: ScriptedProvider([]))
    server_factory = ScriptHolder
    text_reply = staticmethod(_text_reply)
    call_reply = staticmethod(_call_reply)
    error_reply = staticmethod(_error_reply)

    def make(self, server: Any) -> Provider:
        return ScriptedProvider(list(server.replies))
