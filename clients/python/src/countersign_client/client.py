"""Sync and async clients of Countersign's approval API (``/api/external/tool-calls/``).

The flow, for any call an agent intends to make: :meth:`Client.declare` it,
:meth:`Client.wait` for the decision (long-poll), :meth:`Client.claim` it before
running it (one replica wins), run it with the decision's arguments (an
approver's edit included), and :meth:`Client.report` the outcome once.
:meth:`Client.approve` does the first three and raises :class:`Rejected` (or
its :class:`Responded`, when a person answered the call with text instead) or
:class:`Expired` when the call must not run. Requests are retried with
exponential backoff on network errors and 429/502/503/504; every write is safe
to repeat (declarations carry an idempotency key, a claim by the same holder
renews it, the same outcome twice is recorded once).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from countersign_client.errors import (
    Conflict,
    CountersignError,
    Expired,
    InvalidRequest,
    NotAuthorized,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Responded,
)

#: Statuses after which the decision is known.
DECIDED = frozenset(
    {
        "approved",
        "claimed",
        "succeeded",
        "failed",
        "rejected",
        "responded",
        "denied",
        "refused",
        "expired",
        "cancelled",
        "outcome_unknown",
    }
)
#: The longest long-poll the server accepts, in seconds.
MAX_WAIT = 60.0
_RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class Decision:
    """What was decided: ``approved``, the ``arguments`` to run (edits included), and why.

    ``response`` is a person's text when they answered the call instead of
    running it (status ``responded``), else ``None``.
    """

    approved: bool
    arguments: dict[str, Any] | None
    arguments_hash: str | None
    edited: bool
    reason: str
    decided_by: str | None
    authorized_by: str | None
    response: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        """Return the decision in the API's JSON (camelCase)."""
        return cls(
            approved=bool(data.get("approved")),
            arguments=data.get("arguments"),
            arguments_hash=data.get("argumentsHash"),
            edited=bool(data.get("edited")),
            reason=str(data.get("reason") or ""),
            decided_by=data.get("decidedBy"),
            authorized_by=data.get("authorizedBy"),
            response=data.get("response")
            if isinstance(data.get("response"), str)
            else None,
        )


@dataclass(frozen=True)
class CallState:
    """A declared call as Countersign sees it (``GET /api/external/tool-calls/<id>/``)."""

    tool_call_id: str
    status: str
    thread_id: str
    tool: str
    approval_id: int | None
    decision: Decision | None
    holder: str | None
    outcome: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallState:
        """Return the state in the API's JSON."""
        decision = data.get("decision")
        claim = data.get("claim") or {}
        return cls(
            tool_call_id=str(data["toolCallId"]),
            status=str(data["status"]),
            thread_id=str(data.get("threadId", "")),
            tool=str(data.get("tool", "")),
            approval_id=data.get("approvalId"),
            decision=Decision.from_json(decision) if decision else None,
            holder=claim.get("holder"),
            outcome=data.get("outcome"),
            raw=dict(data),
        )

    @property
    def decided(self) -> bool:
        """Whether the decision is known (approved, refused in any way, or final)."""
        return self.status in DECIDED

    def raise_unless_approved(self) -> Decision:
        """Return the approving decision, or raise why the call must not run.

        :class:`Responded` (a person answered it with text: its ``response``
        is the call's result), :class:`Rejected` (rejected, denied by policy,
        refused, cancelled), :class:`Expired`, :class:`OutcomeUnknown`, or
        :class:`Conflict` when it was already run (succeeded, failed) or is
        still pending.
        """
        if self.status in ("approved", "claimed") and self.decision is not None:
            return self.decision
        reason = self.decision.reason if self.decision else ""
        if self.status == "responded":
            text = (self.decision.response if self.decision else None) or ""
            raise Responded(
                f"call {self.tool_call_id} was answered by "
                f"{(self.decision.decided_by if self.decision else None) or 'a person'}"
                f" instead of running: {text}",
                response=text,
            )
        if self.status == "expired":
            raise Expired(f"call {self.tool_call_id} expired before anyone decided")
        if self.status == "outcome_unknown":
            raise OutcomeUnknown(
                f"call {self.tool_call_id}'s claim lapsed without an outcome; an "
                "operator resolves it"
            )
        if self.status in ("rejected", "denied", "refused", "cancelled"):
            detail = reason or (self.outcome or {}).get("content") or self.status
            raise Rejected(
                f"call {self.tool_call_id} was {self.status}: {detail}",
                reason=str(reason or detail),
                status_name=self.status,
            )
        raise Conflict(f"call {self.tool_call_id} is {self.status}; it cannot run now")


def default_holder() -> str:
    """Return a claimant name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _error_for(response: httpx.Response) -> CountersignError:
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text[:500]}
    if not isinstance(body, dict):
        body = {"detail": str(body)}
    message = f"{response.status_code}: {body.get('detail', '')}"
    status = response.status_code
    kind: type[CountersignError] = CountersignError
    if status in (401, 403):
        kind = NotAuthorized
    elif status == 404:
        kind = NotFound
    elif status == 409:
        kind = Conflict
    elif status in (400, 413, 422):
        kind = InvalidRequest
    return kind(message, status=status, body=body)


class _Base:
    """What the sync and async clients share: configuration and request bodies."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        agent: str,
        holder: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.agent = agent
        self.holder = holder or default_holder()
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"}

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter, in seconds."""
        return random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))

    def _declaration(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        input_schema: Mapping[str, Any] | None,
        description: str,
        summary: str,
        annotations: Mapping[str, Any] | None,
        conversation_id: str | None,
        idempotency_key: str | None,
        expires_at: datetime | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "agent": self.agent,
            "tool": tool,
            "arguments": dict(arguments),
            # A retry of this request (a lost response) returns the same call.
            "idempotencyKey": idempotency_key or uuid.uuid4().hex,
        }
        if input_schema is not None:
            body["inputSchema"] = dict(input_schema)
        if description:
            body["description"] = description
        if summary:
            body["summary"] = summary
        if annotations:
            body["annotations"] = dict(annotations)
        if conversation_id:
            body["conversationId"] = conversation_id
        if expires_at is not None:
            body["expiresAt"] = expires_at.isoformat()
        return body

    @staticmethod
    def _outcome(holder: str, result: Any, error: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"holder": holder, "result": result}
        if error:
            body["error"] = error
        return body

    def _url(self, tool_call_id: str, action: str = "") -> str:
        tail = f"{action}/" if action else ""
        return f"{self.base_url}/api/external/tool-calls/{tool_call_id}/{tail}"


class Client(_Base):
    """A synchronous client; ``agent`` is the external agent's name in Countersign.

    ``holder`` names this replica in claims (default: host, pid and a random
    suffix). ``transport`` is an ``httpx`` transport (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        agent: str,
        holder: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            agent=agent,
            holder=holder,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        self._http = httpx.Client(
            headers=self._headers, timeout=timeout + MAX_WAIT, transport=transport
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(
        self, method: str, url: str, *, json: Any = None, params: Any = None
    ) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, url, json=json, params=params)
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise CountersignError(f"{method} {url} failed: {error}") from error
            else:
                if (
                    response.status_code not in _RETRY_STATUSES
                    or attempt == self.retries
                ):
                    if response.is_success:
                        data: dict[str, Any] = response.json()
                        return data
                    raise _error_for(response)
            time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def declare(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        input_schema: Mapping[str, Any] | None = None,
        description: str = "",
        summary: str = "",
        annotations: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        idempotency_key: str | None = None,
        expires_at: datetime | None = None,
    ) -> CallState:
        """Declare the call ``tool(**arguments)`` the agent intends to make; return its state.

        The state is decided at once when the policy says so (``approved``,
        ``denied``), else ``pending``. Raises :class:`InvalidRequest` naming the
        field (unknown tool, arguments failing ``input_schema``...).
        """
        body = self._declaration(
            tool,
            arguments,
            input_schema=input_schema,
            description=description,
            summary=summary,
            annotations=annotations,
            conversation_id=conversation_id,
            idempotency_key=idempotency_key,
            expires_at=expires_at,
        )
        return CallState.from_json(
            self._request(
                "POST", f"{self.base_url}/api/external/tool-calls/", json=body
            )
        )

    def get(self, tool_call_id: str, *, wait: float = 0) -> CallState:
        """Return the call's state, waiting up to ``wait`` seconds (≤ 60) for a decision."""
        params = {"wait": f"{min(wait, MAX_WAIT):g}"} if wait > 0 else None
        return CallState.from_json(
            self._request("GET", self._url(tool_call_id), params=params)
        )

    def wait(self, tool_call_id: str, *, timeout: float | None = None) -> CallState:
        """Long-poll until the call is decided (or ``timeout`` seconds pass); return its state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = MAX_WAIT if deadline is None else deadline - time.monotonic()
            state = self.get(tool_call_id, wait=max(0.0, min(MAX_WAIT, remaining)))
            if state.decided or (deadline is not None and time.monotonic() >= deadline):
                return state

    def claim(self, tool_call_id: str, *, lease_seconds: float = 60) -> CallState:
        """Claim the approved call for this client's holder (or renew the claim).

        Raises :class:`Conflict` when another holder has it (``holder`` names it)
        or when it may not run (its state in the body).
        """
        body = {"holder": self.holder, "leaseSeconds": lease_seconds}
        return CallState.from_json(
            self._request("POST", self._url(tool_call_id, "claim"), json=body)
        )

    def report(
        self, tool_call_id: str, *, result: Any = None, error: str | None = None
    ) -> CallState:
        """Report what the claimed call did: its ``result``, or an ``error`` code. Once."""
        return CallState.from_json(
            self._request(
                "POST",
                self._url(tool_call_id, "outcome"),
                json=self._outcome(self.holder, result, error),
            )
        )

    def approve(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        lease_seconds: float = 60,
        **declaration: Any,
    ) -> tuple[CallState, Decision]:
        """Declare, wait for the decision and claim the call; return it and the decision.

        Run the call with ``decision.arguments`` next, then :meth:`report`.
        Raises :class:`Rejected`, :class:`Expired`, :class:`OutcomeUnknown`, or
        :class:`Conflict` (another replica claimed it).
        """
        state = self.declare(tool, arguments, **declaration)
        if not state.decided:
            state = self.wait(state.tool_call_id, timeout=timeout)
        if not state.decided:
            raise Expired(
                f"call {state.tool_call_id} was not decided within {timeout} s"
            )
        state.raise_unless_approved()
        claimed = self.claim(state.tool_call_id, lease_seconds=lease_seconds)
        return claimed, claimed.raise_unless_approved()


class AsyncClient(_Base):
    """The asynchronous client: the same methods as :class:`Client`, awaited."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        agent: str,
        holder: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            agent=agent,
            holder=holder,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        self._http = httpx.AsyncClient(
            headers=self._headers, timeout=timeout + MAX_WAIT, transport=transport
        )

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(
        self, method: str, url: str, *, json: Any = None, params: Any = None
    ) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(
                    method, url, json=json, params=params
                )
            except httpx.TransportError as error:
                if attempt == self.retries:
                    raise CountersignError(f"{method} {url} failed: {error}") from error
            else:
                if (
                    response.status_code not in _RETRY_STATUSES
                    or attempt == self.retries
                ):
                    if response.is_success:
                        data: dict[str, Any] = response.json()
                        return data
                    raise _error_for(response)
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    async def declare(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        input_schema: Mapping[str, Any] | None = None,
        description: str = "",
        summary: str = "",
        annotations: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        idempotency_key: str | None = None,
        expires_at: datetime | None = None,
    ) -> CallState:
        """Declare a call (see :meth:`Client.declare`)."""
        body = self._declaration(
            tool,
            arguments,
            input_schema=input_schema,
            description=description,
            summary=summary,
            annotations=annotations,
            conversation_id=conversation_id,
            idempotency_key=idempotency_key,
            expires_at=expires_at,
        )
        return CallState.from_json(
            await self._request(
                "POST", f"{self.base_url}/api/external/tool-calls/", json=body
            )
        )

    async def get(self, tool_call_id: str, *, wait: float = 0) -> CallState:
        """Return the call's state, waiting up to ``wait`` seconds for a decision."""
        params = {"wait": f"{min(wait, MAX_WAIT):g}"} if wait > 0 else None
        return CallState.from_json(
            await self._request("GET", self._url(tool_call_id), params=params)
        )

    async def wait(
        self, tool_call_id: str, *, timeout: float | None = None
    ) -> CallState:
        """Long-poll until the call is decided (see :meth:`Client.wait`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = MAX_WAIT if deadline is None else deadline - time.monotonic()
            state = await self.get(
                tool_call_id, wait=max(0.0, min(MAX_WAIT, remaining))
            )
            if state.decided or (deadline is not None and time.monotonic() >= deadline):
                return state

    async def claim(self, tool_call_id: str, *, lease_seconds: float = 60) -> CallState:
        """Claim the approved call (see :meth:`Client.claim`)."""
        body = {"holder": self.holder, "leaseSeconds": lease_seconds}
        return CallState.from_json(
            await self._request("POST", self._url(tool_call_id, "claim"), json=body)
        )

    async def report(
        self, tool_call_id: str, *, result: Any = None, error: str | None = None
    ) -> CallState:
        """Report the claimed call's outcome (see :meth:`Client.report`)."""
        return CallState.from_json(
            await self._request(
                "POST",
                self._url(tool_call_id, "outcome"),
                json=self._outcome(self.holder, result, error),
            )
        )

    async def approve(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        lease_seconds: float = 60,
        **declaration: Any,
    ) -> tuple[CallState, Decision]:
        """Declare, wait and claim (see :meth:`Client.approve`)."""
        state = await self.declare(tool, arguments, **declaration)
        if not state.decided:
            state = await self.wait(state.tool_call_id, timeout=timeout)
        if not state.decided:
            raise Expired(
                f"call {state.tool_call_id} was not decided within {timeout} s"
            )
        state.raise_unless_approved()
        claimed = await self.claim(state.tool_call_id, lease_seconds=lease_seconds)
        return claimed, claimed.raise_unless_approved()
