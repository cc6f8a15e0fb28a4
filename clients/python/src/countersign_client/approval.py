"""``require_approval``: run a plain function only once a person approved the call.

As a decorator, each call of the function is declared to Countersign with its
keyword arguments, waits for the decision, is claimed by this replica, runs with
the approved arguments (an approver's edit included) and has its result (or its
exception) reported once. As a context manager the body runs the call::

    with require_approval(client, "refund", {"order_id": "A-1"}) as approval:
        approval.result = payments.refund(**approval.arguments)

Works with :class:`Client` for plain functions and :class:`AsyncClient` for
coroutine functions (``async with`` for the context manager).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, TypeVar, overload

from countersign_client.client import AsyncClient, CallState, Client, Decision

P = ParamSpec("P")
R = TypeVar("R")


def _jsonable(value: Any) -> Any:
    """Return ``value`` if it is JSON, else its ``repr`` (the tool message is text)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _error_code(error: BaseException) -> str:
    return type(error).__name__[:100]


class Approval:
    """One approved, claimed call: run it with :attr:`arguments`, set :attr:`result`."""

    def __init__(
        self,
        client: Client | AsyncClient,
        tool: str,
        arguments: Mapping[str, Any],
        declaration: dict[str, Any],
    ) -> None:
        self.client = client
        self.tool = tool
        self.proposed = dict(arguments)
        self.declaration = declaration
        self.state: CallState | None = None
        self.decision: Decision | None = None
        self.result: Any = None

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments to run: the approved ones, an approver's edit included."""
        if self.decision is None or self.decision.arguments is None:
            return dict(self.proposed)
        return dict(self.decision.arguments)

    @property
    def tool_call_id(self) -> str:
        """Countersign's id of the call (once declared)."""
        assert self.state is not None, "not declared yet"
        return self.state.tool_call_id

    def __enter__(self) -> Approval:
        assert isinstance(self.client, Client), "use 'async with' with an AsyncClient"
        self.state, self.decision = self.client.approve(
            self.tool, self.proposed, **self.declaration
        )
        return self

    def __exit__(self, kind: type[BaseException] | None, error: Any, tb: Any) -> None:
        assert isinstance(self.client, Client)
        if error is None:
            self.client.report(self.tool_call_id, result=_jsonable(self.result))
        else:
            self.client.report(
                self.tool_call_id, result=str(error), error=_error_code(error)
            )

    async def __aenter__(self) -> Approval:
        assert isinstance(self.client, AsyncClient), "use 'with' with a Client"
        self.state, self.decision = await self.client.approve(
            self.tool, self.proposed, **self.declaration
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: Any, tb: Any
    ) -> None:
        assert isinstance(self.client, AsyncClient)
        if error is None:
            await self.client.report(self.tool_call_id, result=_jsonable(self.result))
        else:
            await self.client.report(
                self.tool_call_id, result=str(error), error=_error_code(error)
            )


class _Decorator:
    """What ``require_approval(client, ...)`` returns: a decorator (see the module)."""

    def __init__(
        self,
        client: Client | AsyncClient,
        tool: str | None,
        declaration: dict[str, Any],
    ) -> None:
        self.client = client
        self.tool = tool
        self.declaration = declaration

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: Callable[P, Any]) -> Callable[P, Any]:
        signature = inspect.signature(fn)
        # Called with the approved arguments by keyword, whatever its signature.
        target: Callable[..., Any] = fn
        tool = self.tool or fn.__name__
        declaration = dict(self.declaration)
        declaration.setdefault("description", (fn.__doc__ or "").strip()[:4000])

        def bound(*args: Any, **kwargs: Any) -> dict[str, Any]:
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            return dict(call.arguments)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                approval = Approval(
                    self.client, tool, bound(*args, **kwargs), declaration
                )
                async with approval:
                    approval.result = await target(**approval.arguments)
                return approval.result

            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            approval = Approval(self.client, tool, bound(*args, **kwargs), declaration)
            with approval:
                approval.result = target(**approval.arguments)
            return approval.result

        return run


@overload
def require_approval(
    client: Client | AsyncClient,
    tool: str,
    arguments: Mapping[str, Any],
    **declaration: Any,
) -> Approval: ...


@overload
def require_approval(
    client: Client | AsyncClient,
    tool: str | None = None,
    arguments: None = None,
    **declaration: Any,
) -> _Decorator: ...


def require_approval(
    client: Client | AsyncClient,
    tool: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    **declaration: Any,
) -> Approval | _Decorator:
    """Return a context manager for one call (with ``arguments``), else a decorator.

    ``tool`` names the tool (the decorated function's name by default);
    ``declaration`` is what :meth:`Client.declare` takes besides (``summary``,
    ``input_schema``, ``annotations``, ``conversation_id``, ``expires_at``...),
    plus ``timeout`` and ``lease_seconds`` of :meth:`Client.approve`. Raises
    what :meth:`Client.approve` raises (:class:`Rejected`, :class:`Expired`,
    :class:`NotAuthorized`...) instead of running the call.
    """
    if arguments is not None:
        assert tool is not None, "a call needs its tool's name"
        return Approval(client, tool, arguments, declaration)
    return _Decorator(client, tool, declaration)
