"""A deterministic, offline model: the embedded default and the test double.

:class:`ScriptedProvider` implements :class:`~agentcore.providers.base.Provider` with no
network and no API key. It has two modes:

- **Rules** (no script given): it reads the last user message and what follows it in
  the history and acts like a small tool-using model over the demo tools:

  - ``weather in <city>`` → calls ``get_weather`` ``{"city": <city>}``, then answers
    in a sentence (``Weather in Oslo: 4.0 °C and light rain, humidity 81%.``);
  - ``refund order <id> <amount>`` → calls ``lookup_order`` ``{"order_id": <id>}``;
    once that is answered, ``refund_order`` ``{"order_id", "amount", "reason":
    "customer request"}``; once that is answered, ``Refund done: 25.00 EUR refunded
    on order A-1001 (refund #1).``, from the executed result, saying so when an
    approver changed the amount (or a sentence saying it was declined, expired,
    cancelled or failed, and why);
  - ``look up order <id>`` → calls ``lookup_order``, then answers in a sentence
    (``Order A-1001 for Ada Lovelace: 4 items, total 500.00 EUR, delivered.``);
  - with a client tool ``confirm`` offered, ``confirm <question>`` → calls
    ``confirm`` ``{"question": <question>}``; once the client answered, ``You
    answered: <answer>``;
  - with a client tool ``notify_customer`` offered, a refund request that says
    ``notify`` calls ``notify_customer`` ``{"message": ...}`` in the same turn as
    ``refund_order`` (a client tool and a held call in one run);
  - anything else → a short text reply saying what it can do.

- **Script** (``ScriptedProvider([...])``): each :meth:`~ScriptedProvider.stream_turn`
  plays the next :class:`ScriptedTurn`, built with :func:`text`, :func:`tool_call`,
  :func:`raw`, :func:`pause`, :func:`raise_error` and combined with :func:`turn`.

Text and argument text are streamed in several fragments, so streaming shows. Every
request is kept in :attr:`ScriptedProvider.requests` for tests to inspect.

Over 400 lines because it holds the offline model and the demo's scripts (weather,
refund, chart) that drive every path without an API key.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from agentcore.events import AssistantMessage, ToolMessage, UserMessage
from agentcore.history import prepare_history
from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    ProviderError,
    StopReason,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
    Usage,
)

__all__ = [
    "REFUND_REASON",
    "ScriptedProvider",
    "ScriptedTurn",
    "pause",
    "raise_error",
    "raw",
    "split_fragments",
    "text",
    "tool_call",
    "turn",
]

#: The ``reason`` the rules give ``refund_order``.
REFUND_REASON: Final = "customer request"

_WEATHER_RE: Final = re.compile(
    r"\bweather\s+in\s+(?P<rest>.+)", re.IGNORECASE | re.DOTALL
)
_REFUND_RE: Final = re.compile(
    r"\brefund\s+order\s+#?(?P<id>[A-Za-z0-9][\w-]*)"
    r"(?:\s+(?:for\s+)?[$€£]?\s*(?P<amount>\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)
_LOOKUP_RE: Final = re.compile(
    r"\b(?:look\s*up|check|show)\s+order\s+#?(?P<id>[A-Za-z0-9][\w-]*)",
    re.IGNORECASE,
)
_CONFIRM_RE: Final = re.compile(
    r"\bconfirm\b\s*(?P<rest>.*)", re.IGNORECASE | re.DOTALL
)
_NOTIFY_RE: Final = re.compile(r"\bnotify\b", re.IGNORECASE)
#: Client (frontend) tools the rules call when the client offers them.
CONFIRM_TOOL: Final = "confirm"
NOTIFY_TOOL: Final = "notify_customer"
#: A word and the spaces after it (or a run of spaces): the demo's paced fragments.
_WORDS: Final = re.compile(r"\S+\s*|\s+")
_SENTENCE_END: Final = re.compile(r"[?!;,\n]|\.(?:\s|$)")
_STRIP: Final = " \t\r\n.,;:!?\"'`()[]{}"
_HELP: Final = (
    "I'm the scripted demo model (no API key needed). Ask me about the "
    '"weather in <city>", say "look up order A-1001", or "refund order <id> <amount>".'
)


# --- script items ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    arguments: str
    call_id: str | None


@dataclass(frozen=True, slots=True)
class _Raw:
    event: ModelEvent


@dataclass(frozen=True, slots=True)
class _Pause:
    seconds: float


@dataclass(frozen=True, slots=True)
class _Raise:
    error: BaseException


_Item = _Text | _Call | _Raw | _Pause | _Raise


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One scripted model turn: its items in order, and how it ends.

    ``stop_reason`` ``None`` means ``"tool_use"`` when the turn has a tool call and
    ``"end_turn"`` otherwise; ``truncated`` means ``"max_tokens"``. ``end=False`` ends
    the stream without a :class:`TurnEnd` (a broken provider); a raw ``TurnEnd`` item
    replaces the automatic one.
    """

    items: tuple[_Item, ...] = ()
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    truncated: bool = False
    end: bool = True

    @property
    def final_stop_reason(self) -> StopReason:
        """Return the stop reason the automatic :class:`TurnEnd` carries."""
        if self.stop_reason is not None:
            return self.stop_reason
        if self.truncated:
            return "max_tokens"
        has_call = any(
            isinstance(i, _Call)
            or (isinstance(i, _Raw) and isinstance(i.event, ToolCallBegin))
            for i in self.items
        )
        return "tool_use" if has_call else "end_turn"


def text(content: str, *, usage: Usage | None = None) -> ScriptedTurn:
    """Return a turn answering ``content`` as text (streamed in several fragments)."""
    return ScriptedTurn(items=(_Text(content),), usage=usage)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    call_id: str | None = None,
    truncated: bool = False,
    usage: Usage | None = None,
) -> ScriptedTurn:
    """Return a turn calling tool ``name``.

    ``arguments`` is a mapping (sent as JSON), raw argument text sent verbatim (it may
    be invalid or cut off), or ``None`` for no argument fragment at all. ``call_id``
    defaults to a generated ``call_<turn>_<n>``. ``truncated`` ends the turn with
    ``max_tokens``.
    """
    if arguments is None:
        argument_text = ""
    elif isinstance(arguments, str):
        argument_text = arguments
    else:
        argument_text = json.dumps(dict(arguments))
    return ScriptedTurn(
        items=(_Call(name, argument_text, call_id),), usage=usage, truncated=truncated
    )


def raw(*events: ModelEvent) -> ScriptedTurn:
    """Return a turn yielding exactly ``events`` (add a ``TurnEnd`` to control the end)."""
    return ScriptedTurn(items=tuple(_Raw(e) for e in events))


def pause(seconds: float) -> ScriptedTurn:
    """Return a turn item that sleeps ``seconds`` before the next event (for limits)."""
    return ScriptedTurn(items=(_Pause(seconds),))


def raise_error(error: BaseException) -> ScriptedTurn:
    """Return a turn item that raises ``error`` (e.g. a :class:`ProviderError`) when reached."""
    return ScriptedTurn(items=(_Raise(error),))


def turn(
    *parts: ScriptedTurn,
    stop_reason: StopReason | None = None,
    usage: Usage | None = None,
    truncated: bool = False,
    end: bool = True,
) -> ScriptedTurn:
    """Return one turn playing the items of ``parts`` in order (text, calls, errors...).

    ``usage`` defaults to the parts' usages summed; ``truncated`` is also set when a
    part was truncated.
    """
    items = tuple(item for part in parts for item in part.items)
    if usage is None:
        usages = [p.usage for p in parts if p.usage is not None]
        if usages:
            usage = Usage(
                input_tokens=sum(u.input_tokens or 0 for u in usages),
                output_tokens=sum(u.output_tokens or 0 for u in usages),
                total_tokens=sum(u.total_tokens or 0 for u in usages),
            )
    return ScriptedTurn(
        items=items,
        stop_reason=stop_reason,
        usage=usage,
        truncated=truncated or any(p.truncated for p in parts),
        end=end,
    )


def split_fragments(value: str, *, pieces: int = 3, max_size: int = 16) -> list[str]:
    """Split ``value`` into at least ``pieces`` fragments (when long enough) of at most ``max_size`` characters.

    The fragments join back to ``value``; ``""`` gives ``[]``.
    """
    if not value:
        return []
    size = max(1, min(max_size, math.ceil(len(value) / pieces)))
    return [value[i : i + size] for i in range(0, len(value), size)]


# --- the provider -----------------------------------------------------------------------


@dataclass
class _RulesState:
    """What follows the last user message: results by tool name (last call wins)."""

    user_text: str = ""
    results: dict[str, ToolMessage] = field(default_factory=dict)
    calls_made: int = 0


class ScriptedProvider(Provider):
    """A deterministic offline provider (name ``"scripted"``); see the module docstring.

    ``turns`` is the script (``None`` = the rules); ``model`` is reported on
    :class:`TurnEnd`; ``delay`` seconds are slept before each fragment; ``pace``
    (characters per second, 0 = instant) streams text and argument text word by
    word at a reading pace, so a demo shows streaming (the demo agent gets
    ``settings.COUNTERSIGN_DEMO_PACE``); ``base_url`` and ``api_key`` are accepted
    and ignored (the registry passes them to every adapter). Implements STYLE 15 and 16.
    """

    name = "scripted"

    def __init__(
        self,
        turns: Iterable[ScriptedTurn] | None = None,
        *,
        model: str = "scripted",
        delay: float = 0.0,
        pace: float = 0.0,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        """Hold the script (or none, for the rules)."""
        self.model = model
        self.delay = delay
        self.pace = max(0.0, float(pace))
        self.script: list[ScriptedTurn] | None = None if turns is None else list(turns)
        self.requests: list[ModelRequest] = []
        self._played = 0

    @property
    def remaining(self) -> int:
        """Return how many scripted turns are left (0 in rules mode)."""
        return 0 if self.script is None else len(self.script) - self._played

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the next scripted turn, or the rules' answer to ``request``.

        Raises :class:`ProviderError` (``script_exhausted``) when the script has no
        turn left, or whatever a :func:`raise_error` item holds.
        """
        self.requests.append(request)
        if self.script is None:
            scripted = self._rules_turn(request)
        else:
            if self._played >= len(self.script):
                raise ProviderError(
                    f"The scripted provider has no turn left (its script had "
                    f"{len(self.script)}).",
                    code="script_exhausted",
                )
            scripted = self.script[self._played]
        self._played += 1
        play = self._play(scripted, request, turn_index=self._played)
        try:
            async for event in play:
                yield event
        finally:
            # Closed here, not by the garbage collector: the loop stops reading at
            # TurnEnd, and a suspended generator left to the collector costs a task
            # and a wake-up of the event loop to finalize (B3).
            await play.aclose()

    async def _play(
        self, scripted: ScriptedTurn, request: ModelRequest, *, turn_index: int
    ) -> AsyncGenerator[ModelEvent, None]:
        """Yield ``scripted``'s items as model events, then its :class:`TurnEnd`."""
        calls = 0
        ended = False
        for item in scripted.items:
            if isinstance(item, _Text):
                for piece in self._fragments(item.text, max_size=16):
                    await self._tick(piece)
                    yield TextDelta(piece)
            elif isinstance(item, _Call):
                calls += 1
                call_id = item.call_id or f"call_{turn_index}_{calls}"
                await self._tick()
                yield ToolCallBegin(call_id=call_id, name=item.name)
                for piece in self._fragments(item.arguments, max_size=12):
                    await self._tick(piece)
                    yield ToolCallDelta(call_id=call_id, delta=piece)
            elif isinstance(item, _Raw):
                await self._tick()
                ended = ended or isinstance(item.event, TurnEnd)
                yield item.event
            elif isinstance(item, _Pause):
                await asyncio.sleep(item.seconds)
            else:
                raise item.error
        if scripted.end and not ended:
            yield TurnEnd(
                stop_reason=scripted.final_stop_reason,
                usage=scripted.usage,
                provider=self.name,
                model=request.model or self.model,
            )

    def _fragments(self, value: str, *, max_size: int) -> list[str]:
        """Split ``value`` as it streams: word by word at a pace, else a few fragments."""
        if self.pace > 0:
            return _WORDS.findall(value)
        return split_fragments(value, max_size=max_size)

    async def _tick(self, piece: str = "") -> None:
        """Sleep the configured delay plus ``piece``'s reading time at ``pace`` (or just yield)."""
        reading = len(piece) / self.pace if self.pace > 0 else 0.0
        await asyncio.sleep(self.delay + reading)

    # -- rules ----------------------------------------------------------------------

    def _rules_turn(self, request: ModelRequest) -> ScriptedTurn:
        """Return the turn the rules give for ``request``'s history."""
        state = _rules_state(request.messages)
        offered = {spec.name for spec in request.tools}
        call_id = f"call_{_count_calls(request.messages) + 1}"
        reply = (
            _weather_rule(state, offered, call_id)
            or _refund_rule(state, offered, call_id)
            or _lookup_rule(state, offered, call_id)
            or _confirm_rule(state, offered, call_id)
        )
        if reply is None:
            reply = text(_HELP)
        words_in = sum(len(_text_of(m).split()) for m in request.messages)
        words_out = sum(
            len(i.text.split()) if isinstance(i, _Text) else len(i.arguments) // 4 + 1
            for i in reply.items
            if isinstance(i, _Text | _Call)
        )
        usage = Usage(
            input_tokens=words_in,
            output_tokens=words_out,
            total_tokens=words_in + words_out,
        )
        return turn(reply, usage=usage)


def _rules_state(messages: Sequence[Any]) -> _RulesState:
    """Return the last user message's text and the tool results after it."""
    prepared = prepare_history(messages)
    last_user = -1
    for index, message in enumerate(prepared):
        if isinstance(message, UserMessage):
            last_user = index
    state = _RulesState()
    if last_user < 0:
        return state
    state.user_text = _text_of(prepared[last_user])
    names: dict[str, str] = {}
    for message in prepared[last_user + 1 :]:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                names[call.id] = call.function.name
                state.calls_made += 1
        elif isinstance(message, ToolMessage) and message.tool_call_id in names:
            state.results[names[message.tool_call_id]] = message
    return state


def _weather_rule(
    state: _RulesState, offered: set[str], call_id: str
) -> ScriptedTurn | None:
    """Return the weather rule's turn, or ``None`` when the user did not ask for weather."""
    match = _WEATHER_RE.search(state.user_text)
    if match is None:
        return None
    city = _SENTENCE_END.split(match.group("rest"), maxsplit=1)[0].strip(_STRIP)
    if not city:
        return text('Which city? Ask me about the "weather in <city>".')
    result = state.results.get("get_weather")
    if result is None:
        if "get_weather" not in offered:
            return _unavailable(f"check the weather in {city}", ["get_weather"])
        return tool_call("get_weather", {"city": city}, call_id=call_id)
    if result.error:
        return text(
            f"I couldn't get the weather in {city}; the tool failed: {_why(result)}"
        )
    report = _json_object(result)
    if report is None or "temperature" not in report:
        return text(f"Weather in {city}: {_content_text(result)}")
    symbol = "°F" if report.get("unit") == "fahrenheit" else "°C"
    sentence = (
        f"Weather in {report.get('city') or city}: {report['temperature']} {symbol}"
        f" and {report.get('conditions', 'unknown conditions')}"
    )
    if report.get("humidity_percent") is not None:
        sentence += f", humidity {report['humidity_percent']}%"
    return text(sentence + ".")


def _refund_rule(
    state: _RulesState, offered: set[str], call_id: str
) -> ScriptedTurn | None:
    """Return the refund rule's turn, or ``None`` when the user did not ask for a refund."""
    match = _REFUND_RE.search(state.user_text)
    if match is None:
        return None
    order_id = match.group("id").strip(_STRIP)
    raw_amount = match.group("amount")
    if raw_amount is None:
        return text(
            f"How much should I refund on order {order_id}? Say "
            f'"refund order {order_id} <amount>".'
        )
    amount: int | float = float(raw_amount) if "." in raw_amount else int(raw_amount)
    missing = [n for n in ("lookup_order", "refund_order") if n not in offered]
    lookup = state.results.get("lookup_order")
    if lookup is None:
        if missing:
            return _unavailable(f"refund order {order_id}", missing)
        return tool_call("lookup_order", {"order_id": order_id}, call_id=call_id)
    if lookup.error:
        return text(f"I couldn't look up order {order_id}: {_why(lookup)}")
    refund = state.results.get("refund_order")
    if refund is None:
        refund_call = tool_call(
            "refund_order",
            {"order_id": order_id, "amount": amount, "reason": REFUND_REASON},
            call_id=call_id,
        )
        if NOTIFY_TOOL in offered and _NOTIFY_RE.search(state.user_text):
            number = int(call_id.rsplit("_", 1)[1]) + 1
            return turn(
                refund_call,
                tool_call(
                    NOTIFY_TOOL,
                    {"message": f"Refunding {amount} on order {order_id}"},
                    call_id=f"call_{number}",
                ),
            )
        return refund_call
    currency = str((_json_object(lookup) or {}).get("currency") or "")
    if refund.error:
        return text(_refund_refused(refund, order_id, _money(amount, currency)))
    return text(_refund_done(refund, order_id, amount, currency))


def _lookup_rule(
    state: _RulesState, offered: set[str], call_id: str
) -> ScriptedTurn | None:
    """Return the order lookup's turn ("look up order <id>"), or ``None`` when not asked."""
    match = _LOOKUP_RE.search(state.user_text)
    if match is None:
        return None
    order_id = match.group("id").strip(_STRIP)
    lookup = state.results.get("lookup_order")
    if lookup is None:
        if "lookup_order" not in offered:
            return _unavailable(f"look up order {order_id}", ["lookup_order"])
        return tool_call("lookup_order", {"order_id": order_id}, call_id=call_id)
    if lookup.error:
        return text(f"I couldn't look up order {order_id}: {_why(lookup)}")
    return text(_order_sentence(lookup, order_id))


def _unavailable(doing: str, missing: list[str]) -> ScriptedTurn:
    """Return ``"I can't <doing>: the <tool> tool is not available here."`` (or tools are)."""
    return text(
        f"I can't {doing}: the {' and '.join(missing)} "
        f"tool{'s are' if len(missing) > 1 else ' is'} not available here."
    )


def _order_sentence(lookup: ToolMessage, order_id: str) -> str:
    """Return ``"Order A-1001 for Ada Lovelace: 4 items, total 500.00 EUR, delivered."``."""
    order = _json_object(lookup)
    if order is None:
        return f"Order {order_id}: {_content_text(lookup)}"
    items = order.get("items") or []
    count = sum(int(i.get("quantity", 1)) for i in items if isinstance(i, dict)) or len(
        items
    )
    parts = [f"{count} item{'' if count == 1 else 's'}"]
    if order.get("total") is not None:
        parts.append(
            f"total {_money(order['total'], str(order.get('currency') or ''))}"
        )
    if order.get("status"):
        parts.append(str(order["status"]))
    customer = f" for {order['customer']}" if order.get("customer") else ""
    return f"Order {order.get('order_id') or order_id}{customer}: {', '.join(parts)}."


def _refund_done(
    refund: ToolMessage, order_id: str, proposed: int | float, currency: str
) -> str:
    """Say what the refund that ran did: its executed amount and reason, not the proposal.

    An approver may have edited the arguments before approving (IR-11): the result
    carries what was executed, and a difference from what was proposed is said.
    """
    result = _json_object(refund)
    if result is None or result.get("amount") is None:
        return f"Refund done: {_content_text(refund)}"
    refunded = _money(result["amount"], currency)
    sentence = (
        f"Refund done: {refunded} refunded on order "
        f"{result.get('order_id') or order_id}"
    )
    if result.get("refund_id") is not None:
        sentence += f" (refund #{result['refund_id']})"
    sentence += "."
    if _decimal(result["amount"]) != _decimal(proposed):
        sentence += (
            f" The approver changed the amount: I had proposed "
            f"{_money(proposed, currency)}."
        )
    reason = result.get("reason")
    if isinstance(reason, str) and reason and reason != REFUND_REASON:
        sentence += f' Reason recorded: "{reason}".'
    return sentence


def _refund_refused(refund: ToolMessage, order_id: str, amount: str) -> str:
    """Say why the refund of ``amount`` did not happen, in a sentence."""
    detail = _json_object(refund) or {}
    reason = detail.get("reason") if isinstance(detail.get("reason"), str) else ""
    if refund.error == "declined_by_operator":
        return (
            f"I did not refund {amount} on order {order_id}: an approver declined it"
            + (f", saying: {reason}" if reason else "")
            + "."
        )
    if refund.error == "answered_by_operator":
        answer = (
            detail.get("response") if isinstance(detail.get("response"), str) else ""
        )
        return (
            f"I did not refund {amount} on order {order_id}: an approver answered "
            f"instead: {answer}"
        )
    if refund.error == "approval_expired":
        return (
            f"I did not refund {amount} on order {order_id}: nobody approved it "
            "before the request expired."
        )
    if refund.error == "cancelled":
        return (
            f"I did not refund {amount} on order {order_id}: the request was cancelled."
        )
    # It ran (or was refused at execution) with the arguments an approver may have
    # edited: the proposed amount is not named, the tool's own reason is.
    return f"The refund on order {order_id} failed: {_why(refund)}"


def _json_object(message: ToolMessage | None) -> dict[str, Any] | None:
    """Return a tool message's content parsed as a JSON object, or ``None``."""
    if message is None:
        return None
    try:
        parsed = json.loads(_content_text(message))
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _money(value: Any, currency: str) -> str:
    """Return ``"25.00 EUR"`` (two decimals; the value as given when not a number)."""
    number = _decimal(value)
    shown = f"{number:.2f}" if number is not None and number.is_finite() else str(value)
    return f"{shown} {currency}".strip()


def _confirm_rule(
    state: _RulesState, offered: set[str], call_id: str
) -> ScriptedTurn | None:
    """Return the confirm rule's turn (a client tool), or ``None`` when it does not apply."""
    match = _CONFIRM_RE.search(state.user_text)
    if match is None or CONFIRM_TOOL not in offered:
        return None
    answer = state.results.get(CONFIRM_TOOL)
    if answer is None:
        question = match.group("rest").strip(_STRIP) or "Proceed?"
        return tool_call(CONFIRM_TOOL, {"question": question}, call_id=call_id)
    return text(f"You answered: {_content_text(answer)}")


def _count_calls(messages: Sequence[Any]) -> int:
    """Return how many tool calls the history holds."""
    return sum(
        len(m.tool_calls or ()) for m in messages if isinstance(m, AssistantMessage)
    )


def _text_of(message: Any) -> str:
    """Return a message's text: a string content, or its text parts joined."""
    content = getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        value = (
            part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        )
        if isinstance(value, str):
            parts.append(value)
    return "".join(parts)


def _content_text(message: ToolMessage) -> str:
    """Return a tool message's content as text (text parts joined)."""
    return _text_of(message)


def _why(message: ToolMessage) -> str:
    """Return why a tool message reports a failure, quoting its content."""
    content = _content_text(message)
    detail = content
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        detail = parsed["detail"]
    detail = detail.strip() or "no reason was given"
    return f"{detail} ({message.error})" if message.error else detail
