"""Tests for the demo toolset with real values (RT-01, RT-03, LP-01, LP-07, TC-10)."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from decimal import Decimal
from typing import Any

import pytest

from agentcore.dispatch import ToolCallRequest, dispatch, execute_call
from agentcore.tools import ToolContext, Toolset
from demo.tools import (
    DEMO_TOOLS,
    ORDERS,
    get_weather,
    lookup_order,
    png_bar_chart,
    refund_order,
    render_chart,
)


def ctx(call: ToolCallRequest, key: str | None = None) -> ToolContext:
    return ToolContext(
        thread_id="th1",
        run_id="run1",
        tool_call_id=call.tool_call_id,
        idempotency_key=key or f"th1:{call.tool_call_id}",
    )


TOOLSET = Toolset(DEMO_TOOLS)


async def run_one(name: str, arguments: Any, key: str | None = None) -> Any:
    call = ToolCallRequest("call_1", name, arguments)
    return await execute_call(call, tool=None, toolset=TOOLSET, context=ctx(call, key))


def test_rt03_demo_tools_order_and_paths() -> None:
    """RT-03, RT-01: the demo toolset is an explicit ordered tuple covering every path."""
    assert [t.name for t in DEMO_TOOLS] == [
        "get_weather",
        "lookup_order",
        "refund_order",
        "render_chart",
    ]
    assert (
        get_weather.runs_on,
        get_weather.is_read_only,
        get_weather.execution_mode,
    ) == (
        "agent",
        True,
        "parallel",
    )
    assert (lookup_order.runs_on, lookup_order.is_read_only, lookup_order.policy) == (
        "application",
        True,
        "auto",
    )
    assert refund_order.runs_on == "application"
    assert refund_order.is_destructive
    assert refund_order.idempotent
    assert refund_order.policy_for(
        {"order_id": "A-1001", "amount": 1, "reason": "x"}
    ) == ("require_approval")
    assert refund_order.permission == "demo.add_refund"
    assert render_chart.is_read_only


def test_rt01_demo_passthrough_schema_keeps_constraints() -> None:
    """RT-01: refund_order's passthrough schema keeps pattern, exclusiveMinimum and maximum."""
    amount = refund_order.spec().parameters["properties"]["amount"]
    assert amount["exclusiveMinimum"] == 0
    assert amount["maximum"] == 10000
    assert refund_order.spec().parameters["properties"]["order_id"]["pattern"] == (
        "^[A-Z]-[0-9]{4}$"
    )


async def test_get_weather_is_deterministic_and_converts_units() -> None:
    """get_weather returns fixed offline data and converts to Fahrenheit."""
    c = await run_one("get_weather", '{"city": "Oslo"}')
    f = await run_one("get_weather", '{"city": "Oslo", "unit": "fahrenheit"}')
    assert json.loads(c.content) == {
        "city": "Oslo",
        "temperature": 4.0,
        "unit": "celsius",
        "conditions": "light rain",
        "humidity_percent": 81,
    }
    assert json.loads(f.content)["temperature"] == 39.2
    other1 = await run_one("get_weather", '{"city": "Reykjavik"}')
    other2 = await run_one("get_weather", '{"city": "Reykjavik"}')
    assert other1.content == other2.content
    bad = await run_one("get_weather", '{"city": "Oslo", "unit": "kelvin"}')
    assert bad.error == "invalid_arguments"
    assert (
        get_weather.describe_activity({"city": "Oslo"})
        == "Checking the weather in Oslo"
    )


async def test_lp03_weather_calls_run_in_parallel() -> None:
    """LP-03: several get_weather calls in one turn are answered in call order."""
    calls = [
        ToolCallRequest(f"c{i}", "get_weather", {"city": city})
        for i, city in enumerate(["Oslo", "Paris", "Tokyo"])
    ]
    results = await dispatch(calls, toolset=TOOLSET, context_factory=ctx)
    assert [json.loads(r.content)["city"] for r in results] == [
        "Oslo",
        "Paris",
        "Tokyo",
    ]


async def test_lookup_order_returns_the_order() -> None:
    """lookup_order returns A-1001 with its customer and a total of at least 25.00."""
    result = await run_one("lookup_order", '{"order_id": "A-1001"}')
    order = json.loads(result.content)
    assert order["customer"] == "Ada Lovelace"
    assert Decimal(order["total"]) >= Decimal("25.00")
    missing = await run_one("lookup_order", '{"order_id": "Z-9999"}')
    assert missing.error == "invalid_arguments"
    assert "no order 'Z-9999'" in missing.message
    malformed = await run_one("lookup_order", '{"order_id": "1001"}')
    assert malformed.error == "invalid_arguments"
    assert "order_id" in malformed.message


@pytest.mark.django_db(transaction=True)
async def test_lp07_refund_twice_with_same_key_refunds_once() -> None:
    """LP-07: a second execution with the same idempotency key refunds nothing and returns the same result."""
    from demo.models import Refund

    args = '{"order_id": "A-1001", "amount": 25.0, "reason": "damaged in transit"}'
    first = await run_one("refund_order", args, key="idem-1")
    second = await run_one("refund_order", args, key="idem-1")
    assert first.error is None
    assert second.error is None
    assert first.content == second.content
    body = json.loads(first.content)
    assert body["status"] == "refunded"
    assert body["amount"] == "25.00"
    assert first.details == {"replayed": False}
    assert second.details == {"replayed": True}
    rows = [r async for r in Refund.objects.all()]
    assert len(rows) == 1
    assert rows[0].amount == Decimal("25.00")
    assert rows[0].order_id == "A-1001"
    assert rows[0].reason == "damaged in transit"
    assert rows[0].idempotency_key == "idem-1"


@pytest.mark.django_db(transaction=True)
async def test_refund_cannot_exceed_what_is_left() -> None:
    """refund_order refuses more than the order total minus earlier refunds, with an actionable message."""
    from demo.models import Refund

    total = Decimal(ORDERS["A-1002"]["total"])
    ok = await run_one(
        "refund_order",
        {"order_id": "A-1002", "amount": 10, "reason": "partial"},
        key="k1",
    )
    assert ok.error is None
    too_much = await run_one(
        "refund_order",
        {"order_id": "A-1002", "amount": 10, "reason": "again"},
        key="k2",
    )
    assert too_much.error == "invalid_arguments"
    assert f"refund at most {total - 10:.2f}" in too_much.message
    cents = await run_one(
        "refund_order",
        {"order_id": "A-1002", "amount": 1.234, "reason": "odd"},
        key="k3",
    )
    assert cents.error == "invalid_arguments"
    assert "two decimals" in cents.message
    assert await Refund.objects.acount() == 1


@pytest.mark.django_db
def test_refund_unique_constraint_backs_idempotency() -> None:
    """LP-07: the database refuses a second Refund row with the same key."""
    from django.db import IntegrityError

    from demo.models import Refund

    Refund.objects.create(
        idempotency_key="k", order_id="A-1001", amount=Decimal("1.00"), reason="r"
    )
    with pytest.raises(IntegrityError):
        Refund.objects.create(
            idempotency_key="k", order_id="A-1001", amount=Decimal("2.00"), reason="r"
        )


async def test_refund_is_not_run_by_agent_side_dispatch() -> None:
    """LP-01: refund_order is an application tool needing approval; dispatch does not run it."""
    [result] = await dispatch(
        [
            ToolCallRequest(
                "c",
                "refund_order",
                {"order_id": "A-1001", "amount": 5, "reason": "xyz"},
            )
        ],
        toolset=TOOLSET,
        context_factory=ctx,
    )
    assert result.error == "permission_denied"


def _decode_png(png: bytes) -> tuple[int, int, bytes]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        tag = png[pos + 4 : pos + 8]
        data = png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(tag + data) & 0xFFFFFFFF
        chunks[tag] = chunks.get(tag, b"") + data
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, color) == (8, 2)
    return width, height, zlib.decompress(chunks[b"IDAT"])


async def test_tc10_render_chart_returns_a_real_png_image_part() -> None:
    """TC-10: render_chart answers with an image part holding a valid PNG as base64 data."""
    result = await run_one(
        "render_chart", '{"series": [1, 3, 2, -1], "title": "Sales"}'
    )
    assert result.error is None
    text, image = result.content
    assert text == {"type": "text", "text": "Sales: 4 values, min -1, max 3."}
    assert image["type"] == "image"
    assert image["source"]["type"] == "data"
    assert image["source"]["mimeType"] == "image/png"
    assert image["metadata"]["title"] == "Sales"
    png = base64.b64decode(image["source"]["value"])
    width, height, raw = _decode_png(png)
    assert (width, height) == (image["metadata"]["width"], image["metadata"]["height"])
    assert len(raw) == height * (1 + 3 * width)
    assert png == png_bar_chart([1, 3, 2, -1])
    empty = await run_one("render_chart", '{"series": []}')
    assert empty.error == "invalid_arguments"
