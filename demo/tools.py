"""The demo toolset: one tool for every path through Countersign, all offline.

- ``get_weather``: agent side, read-only, parallel; answered in-stream.
- ``lookup_order``: application tool, read-only, auto-approved.
- ``refund_order``: application tool, destructive, requires approval, idempotent
  (keyed by the call's idempotency key, recorded in :class:`demo.models.Refund`).
- ``render_chart``: returns an image part (a PNG made here with zlib and struct).

Django is imported lazily inside ``refund_order``'s execute, so importing this module
needs no configured settings.

Over 400 lines because it holds the demo toolset that shows every path (agent-side,
auto, approval, media) with its refund ledger logic.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import zlib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, Field

from agentcore.content import data_source, image_part, serialize_structured, text_part
from agentcore.tools import (
    CallReview,
    Tool,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolOutput,
    define_tool,
)

if TYPE_CHECKING:
    from demo.models import Refund

__all__ = [
    "DEMO_TOOLS",
    "ORDERS",
    "WEATHER",
    "get_weather",
    "lookup_order",
    "png_bar_chart",
    "refund_order",
    "render_chart",
]

logger = logging.getLogger(__name__)

# --- get_weather --------------------------------------------------------------------

#: Fixed observations in Celsius: (temperature, conditions, humidity %).
WEATHER: Final = MappingProxyType(
    {
        "oslo": (4.0, "light rain", 81),
        "paris": (14.5, "partly cloudy", 63),
        "london": (11.0, "overcast", 77),
        "tokyo": (19.5, "clear", 55),
        "new york": (16.0, "sunny", 48),
        "seoul": (12.5, "clear", 52),
    }
)
_CONDITIONS: Final = (
    "clear",
    "sunny",
    "partly cloudy",
    "overcast",
    "light rain",
    "snow",
)


class WeatherParams(BaseModel):
    """Parameters of ``get_weather``."""

    city: str = Field(
        min_length=1, max_length=100, description="City name, e.g. 'Oslo'."
    )
    unit: Literal["celsius", "fahrenheit"] = Field(
        default="celsius", description="Temperature unit."
    )


def _observe(city: str) -> tuple[float, str, int]:
    """Return the fixed observation for ``city``, or a deterministic one derived from its name."""
    known = WEATHER.get(city.strip().lower())
    if known is not None:
        return known
    digest = hashlib.sha256(city.strip().lower().encode("utf-8")).digest()
    temperature = round(-10 + (int.from_bytes(digest[:2], "big") % 400) / 10, 1)
    return temperature, _CONDITIONS[digest[2] % len(_CONDITIONS)], 30 + digest[3] % 61


def _get_weather(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    """Return the current weather for ``params["city"]`` in the requested unit."""
    city = params["city"].strip()
    unit = params.get("unit", "celsius")
    celsius, conditions, humidity = _observe(city)
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)
    report = {
        "city": city,
        "temperature": temperature,
        "unit": unit,
        "conditions": conditions,
        "humidity_percent": humidity,
    }
    return ToolOutput(
        content=serialize_structured(report), details={"source": "offline"}
    )


def _weather_done(params: dict[str, Any], result: ToolOutput) -> str:
    """Return ``"Weather in Oslo: 4.0 °C, light rain"``."""
    import json

    try:
        report = json.loads(result.content) if isinstance(result.content, str) else {}
    except ValueError:
        report = {}
    symbol = "°F" if report.get("unit") == "fahrenheit" else "°C"
    return (
        f"Weather in {params['city']}: {report.get('temperature')} {symbol}, "
        f"{report.get('conditions')}"
    )


get_weather: Final[Tool] = define_tool(
    name="get_weather",
    description=(
        "Get the current weather for one city: temperature, conditions and humidity. "
        "Use it when the user asks about the weather; call it once per city."
    ),
    parameters=WeatherParams,
    execute=_get_weather,
    runs_on="agent",
    is_read_only=True,
    execution_mode="parallel",
    policy="auto",
    timeout=5.0,
    activity="Checking the weather in {city}",
    completed_activity=_weather_done,
)

# --- lookup_order ------------------------------------------------------------------

_ORDER_ID_SCHEMA: Final = {
    "type": "string",
    "pattern": "^[A-Z]-[0-9]{4}$",
    "description": "Order id such as 'A-1001'.",
}

#: The offline order book. Totals are decimal strings in the order's currency.
ORDERS: Final[Mapping[str, dict[str, Any]]] = MappingProxyType(
    {
        "A-1001": {
            "order_id": "A-1001",
            "customer": "Ada Lovelace",
            "email": "ada@example.com",
            "status": "delivered",
            "currency": "EUR",
            # Large enough that the demo's 25.00 refund can be tried many times.
            "total": "500.00",
            "items": [
                {"sku": "BK-101", "name": "Notebook", "quantity": 2, "price": "12.50"},
                {
                    "sku": "PN-007",
                    "name": "Fountain pen",
                    "quantity": 1,
                    "price": "17.50",
                },
                {
                    "sku": "DL-300",
                    "name": "Desk lamp",
                    "quantity": 1,
                    "price": "457.50",
                },
            ],
        },
        "A-1002": {
            "order_id": "A-1002",
            "customer": "Grace Hopper",
            "email": "grace@example.com",
            "status": "shipped",
            "currency": "EUR",
            "total": "19.99",
            "items": [
                {"sku": "MG-220", "name": "Mug", "quantity": 1, "price": "19.99"}
            ],
        },
        "A-1003": {
            "order_id": "A-1003",
            "customer": "Alan Turing",
            "email": "alan@example.com",
            "status": "processing",
            "currency": "EUR",
            "total": "310.00",
            "items": [
                {"sku": "KB-900", "name": "Keyboard", "quantity": 2, "price": "155.00"}
            ],
        },
    }
)


def _order(order_id: str) -> dict[str, Any]:
    """Return a copy of order ``order_id``. Raises :class:`ToolInputError` when unknown."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolInputError(
            f"no order {order_id!r} exists; check the id with the user (ids look like "
            "'A-1001') and call lookup_order again"
        )
    return {**order, "items": [dict(item) for item in order["items"]]}


def _lookup_order(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    """Return order ``params["order_id"]`` as compact JSON."""
    order = _order(params["order_id"])
    return ToolOutput(
        content=serialize_structured(order), details={"order_id": order["order_id"]}
    )


lookup_order: Final[Tool] = define_tool(
    name="lookup_order",
    description=(
        "Look up one order by id: customer, status, items and total. Use it before "
        "refunding, to check the order and its total."
    ),
    parameters={
        "type": "object",
        "properties": {"order_id": _ORDER_ID_SCHEMA},
        "required": ["order_id"],
        "additionalProperties": False,
    },
    execute=_lookup_order,
    runs_on="application",
    is_read_only=True,
    execution_mode="parallel",
    policy="auto",
    timeout=5.0,
    activity="Looking up order {order_id}",
)

# --- refund_order ------------------------------------------------------------------

_CENT: Final = Decimal("0.01")


def _refund_content(refund: Refund) -> str:
    """Return the result the model sees for a refund row (the same on every replay)."""
    return serialize_structured(
        {
            "status": "refunded",
            "refund_id": refund.pk,
            "order_id": refund.order_id,
            "amount": f"{refund.amount:.2f}",
            "reason": refund.reason,
        }
    )


def _refund_order(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    """Refund ``amount`` on ``order_id`` once per idempotency key.

    A second execution with the same ``context.idempotency_key`` refunds nothing and
    returns the first execution's result. Raises :class:`ToolInputError` for an
    unknown order, an amount with more than two decimals, or one above what is left
    to refund. Implements LP-07.
    """
    # Deferred: the demo tools are plain agentcore tools, importable without Django
    # (the scripted provider's tests use them); only the refund needs the ledger.
    from django.db import IntegrityError, transaction
    from django.db.models import Sum

    from demo.models import Refund

    key = context.idempotency_key
    if not key:
        raise ToolError(
            "refund_order ran without an idempotency key; nothing was refunded"
        )
    existing = Refund.objects.filter(idempotency_key=key).first()
    if existing is not None:
        return ToolOutput(content=_refund_content(existing), details={"replayed": True})
    order_id = params["order_id"]
    order = _order(order_id)
    try:
        amount = Decimal(str(params["amount"]))
    except InvalidOperation as error:
        raise ToolInputError("amount must be a number such as 12.50") from error
    if amount != amount.quantize(_CENT):
        raise ToolInputError(
            f"amount {params['amount']!r} has more than two decimals; round it to cents"
        )
    total = Decimal(order["total"])
    with transaction.atomic():
        refunded = Refund.objects.filter(order_id=order_id).aggregate(s=Sum("amount"))[
            "s"
        ]
        left = total - (refunded or Decimal("0"))
        if amount > left:
            raise ToolInputError(
                f"amount {amount:.2f} exceeds what is left to refund on {order_id} "
                f"({left:.2f} of {total:.2f}); refund at most {left:.2f}"
            )
        try:
            with transaction.atomic():
                refund = Refund.objects.create(
                    idempotency_key=key,
                    order_id=order_id,
                    amount=amount.quantize(_CENT),
                    reason=params["reason"],
                )
            replayed = False
        except IntegrityError:
            refund = Refund.objects.get(idempotency_key=key)
            replayed = True
    logger.info("refund %s on %s (replayed=%s)", refund.pk, order_id, replayed)
    return ToolOutput(content=_refund_content(refund), details={"replayed": replayed})


def _money(amount: Decimal, currency: str = "") -> str:
    """Return ``amount`` as every surface shows money: two decimals, then the currency.

    ``_money(Decimal("25"), "EUR")`` is ``"25.00 EUR"``; without a currency
    (an unknown order) only the number, ``"25.00"``.
    """
    shown = f"{amount:.2f}"
    return f"{shown} {currency}" if currency else shown


def _refund_activity(params: dict[str, Any]) -> str:
    """Return the refund's label, its money shown as the review shows it (:func:`_money`).

    ``"Refunding 25.00 EUR on order A-1001"``; an amount that is no number is
    quoted as given. Implements RT-01.
    """
    order_id = str(params.get("order_id", ""))
    order = ORDERS.get(order_id)
    try:
        amount = Decimal(str(params.get("amount")))
    except InvalidOperation:
        amount = None
    shown = (
        _money(amount, order["currency"] if order else "")
        if amount is not None and amount.is_finite()
        else repr(params.get("amount"))
    )
    return f"Refunding {shown} on order {order_id}"


def _refund_review(params: dict[str, Any]) -> CallReview:
    """Say what the refund does, on which order, against what is left to refund.

    Warns (before anyone approves) about what :func:`_refund_order` would refuse:
    an unknown order, an amount with more than two decimals, or one over what is
    left to refund. Money is shown with its currency and two decimals.
    """
    from django.db.models import Sum

    from demo.models import Refund

    order_id = str(params.get("order_id", ""))
    order = ORDERS.get(order_id)
    try:
        amount = Decimal(str(params.get("amount")))
    except InvalidOperation:
        return CallReview(
            summary=f"Refund on order {order_id}",
            warnings=(f"the amount {params.get('amount')!r} is not a number",),
        )
    if order is None:
        return CallReview(
            summary=f"Refund {_money(amount)} on order {order_id}",
            warnings=(f"there is no order {order_id}: the refund would be refused",),
        )
    currency = order["currency"]
    total = Decimal(order["total"])
    refunded = Refund.objects.filter(order_id=order_id).aggregate(s=Sum("amount"))[
        "s"
    ] or Decimal("0")
    left = total - refunded
    warnings = []
    if amount != amount.quantize(_CENT):
        warnings.append(
            f"{amount} has more than two decimals: the refund would be refused"
        )
    if amount > left:
        warnings.append(
            f"{_money(amount, currency)} exceeds what is left to refund "
            f"({_money(left, currency)}): the refund would be refused"
        )
    return CallReview(
        summary=f"Refund {_money(amount, currency)} to {order['customer']} on order {order_id}",
        facts=(
            ("Order total", _money(total, currency)),
            ("Refunded already", _money(refunded, currency)),
            ("Left to refund", _money(left, currency)),
            ("Reason given", str(params.get("reason", ""))),
        ),
        warnings=tuple(warnings),
    )


refund_order: Final[Tool] = define_tool(
    name="refund_order",
    description=(
        "Refund part or all of an order to the customer. Destructive: a person "
        "approves it first. Look the order up first and never refund more than its "
        "total."
    ),
    parameters={
        "type": "object",
        "properties": {
            "order_id": _ORDER_ID_SCHEMA,
            "amount": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 10000,
                "description": "Amount to refund, in the order's currency, e.g. 12.50.",
            },
            "reason": {
                "type": "string",
                "minLength": 3,
                "maxLength": 500,
                "description": "Why the customer is refunded.",
            },
        },
        "required": ["order_id", "amount", "reason"],
        "additionalProperties": False,
    },
    execute=_refund_order,
    runs_on="application",
    is_destructive=True,
    policy="require_approval",
    idempotent=True,
    permission="demo.add_refund",
    timeout=10.0,
    activity=_refund_activity,
    review=_refund_review,
)

# --- render_chart ------------------------------------------------------------------

_BAR: Final = (37, 99, 235)
_BACKGROUND: Final = (255, 255, 255)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    """Return one PNG chunk: length, tag, data, CRC-32."""
    return (
        struct.pack(">I", len(data))
        + tag
        + data
        + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    )


def png_bar_chart(
    series: list[float], *, height: int = 64, bar_width: int = 6
) -> bytes:
    """Return a PNG (8-bit RGB) bar chart of ``series``; bars scale to the largest magnitude.

    Raises ValueError for an empty series.
    """
    if not series:
        raise ValueError("series is empty")
    gap = 2
    width = len(series) * (bar_width + gap) + gap
    low = min(0.0, min(series))
    high = max(0.0, max(series))
    span = (high - low) or 1.0
    baseline = round((high - 0.0) / span * (height - 1))
    tops = [round((high - v) / span * (height - 1)) for v in series]
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: none
        row = [_BACKGROUND] * width
        for i, top in enumerate(tops):
            lo, hi = sorted((top, baseline))
            if lo <= y <= hi:
                start = gap + i * (bar_width + gap)
                row[start : start + bar_width] = [_BAR] * bar_width
        for pixel in row:
            rows.extend(pixel)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _png_chunk(b"IEND", b"")
    )


class ChartParams(BaseModel):
    """Parameters of ``render_chart``."""

    series: list[float] = Field(
        min_length=1, max_length=100, description="The values to plot, in order."
    )
    title: str = Field(default="", max_length=80, description="Optional chart title.")


def _render_chart(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    """Return a text summary and an image part holding the PNG bar chart. Implements TC-10."""
    series = [float(v) for v in params["series"]]
    png = png_bar_chart(series)
    width, height = struct.unpack(">II", png[16:24])
    title = params.get("title") or "Bar chart"
    summary = (
        f"{title}: {len(series)} values, min {min(series):g}, max {max(series):g}."
    )
    image = image_part(
        data_source(png, mime_type="image/png"),
        metadata={"title": title, "width": width, "height": height},
    )
    return ToolOutput(content=[text_part(summary), image], details={"bytes": len(png)})


render_chart: Final[Tool] = define_tool(
    name="render_chart",
    description=(
        "Draw a bar chart of a series of numbers and return it as a PNG image. Use it "
        "when a picture of the numbers helps the user."
    ),
    parameters=ChartParams,
    execute=_render_chart,
    runs_on="agent",
    is_read_only=True,
    execution_mode="parallel",
    policy="auto",
    timeout=5.0,
    max_result_bytes=256 * 1024,
    activity="Drawing a chart",
)

#: The demo agent's tools, in the order they are offered (RT-03).
DEMO_TOOLS: Final = (get_weather, lookup_order, refund_order, render_chart)
