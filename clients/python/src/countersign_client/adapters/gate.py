"""The decision source every adapter shares: a framework's tool call → Countersign's verdict.

A :class:`Gate` declares a framework's pending tool call (keyed by the
framework's own call id, which is also the idempotency key, so a restarted
process finds the same request), waits for the decision, and claims an
approved call for this replica before the framework runs it. After the
framework ran it, :meth:`Gate.report` (or :meth:`Gate.areport`) records the
outcome once. A call another replica claimed is refused here (it runs there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from countersign_client.client import AsyncClient, CallState, Client
from countersign_client.errors import Conflict, Expired, OutcomeUnknown, Rejected


@dataclass(frozen=True)
class Verdict:
    """Countersign's answer for one framework call: run it (with ``arguments``) or not (``reason``)."""

    approved: bool
    arguments: dict[str, Any]
    edited: bool
    reason: str
    tool_call_id: str


@dataclass
class Gate:
    """Decisions for one conversation's tool calls (``conversation_id``: Countersign's thread).

    ``input_schemas`` and ``summaries`` give, per tool name, the schema the
    arguments (and approvers' edits) are validated against and a sentence for
    the approver. ``timeout`` bounds each wait for a person, in seconds.
    """

    client: Client | AsyncClient
    conversation_id: str | None = None
    input_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    summaries: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    lease_seconds: float = 300
    #: The framework's call id → Countersign's, for the calls this gate claimed.
    claimed: dict[str, str] = field(default_factory=dict)

    def _declaration(self, call_id: str, name: str) -> dict[str, Any]:
        key = f"{self.conversation_id or ''}:{call_id}"
        return {
            "input_schema": self.input_schemas.get(name),
            "summary": self.summaries.get(name, ""),
            "conversation_id": self.conversation_id,
            "idempotency_key": key[:255],
            "timeout": self.timeout,
            "lease_seconds": self.lease_seconds,
        }

    def _verdict(self, call_id: str, state: CallState) -> Verdict:
        assert state.decision is not None
        self.claimed[call_id] = state.tool_call_id
        return Verdict(
            approved=True,
            arguments=dict(state.decision.arguments or {}),
            edited=state.decision.edited,
            reason=state.decision.reason,
            tool_call_id=state.tool_call_id,
        )

    @staticmethod
    def _refusal(error: Exception, arguments: Mapping[str, Any]) -> Verdict:
        reason = getattr(error, "reason", "") or str(error)
        if isinstance(error, Conflict):
            reason = f"another replica runs this call: {error}"
        return Verdict(
            approved=False,
            arguments=dict(arguments),
            edited=False,
            reason=reason,
            tool_call_id="",
        )

    def decide(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> Verdict:
        """Declare ``name(**arguments)``, wait for a person, claim it if approved (sync)."""
        assert isinstance(self.client, Client), "decide needs a Client; use adecide"
        try:
            state, _ = self.client.approve(
                name, arguments, **self._declaration(call_id, name)
            )
        except (Rejected, Expired, OutcomeUnknown, Conflict) as error:
            return self._refusal(error, arguments)
        return self._verdict(call_id, state)

    async def adecide(
        self, call_id: str, name: str, arguments: Mapping[str, Any]
    ) -> Verdict:
        """Declare, wait and claim, with an :class:`AsyncClient`."""
        assert isinstance(self.client, AsyncClient), "adecide needs an AsyncClient"
        try:
            state, _ = await self.client.approve(
                name, arguments, **self._declaration(call_id, name)
            )
        except (Rejected, Expired, OutcomeUnknown, Conflict) as error:
            return self._refusal(error, arguments)
        return self._verdict(call_id, state)

    def report(self, call_id: str, result: Any, *, error: str | None = None) -> bool:
        """Report what the framework's call ``call_id`` returned; whether it was one of ours."""
        assert isinstance(self.client, Client), "report needs a Client; use areport"
        ours = self.claimed.pop(call_id, None)
        if ours is None:
            return False
        self.client.report(ours, result=result, error=error)
        return True

    async def areport(
        self, call_id: str, result: Any, *, error: str | None = None
    ) -> bool:
        """Report an outcome with an :class:`AsyncClient` (see :meth:`report`)."""
        assert isinstance(self.client, AsyncClient), "areport needs an AsyncClient"
        ours = self.claimed.pop(call_id, None)
        if ours is None:
            return False
        await self.client.report(ours, result=result, error=error)
        return True
