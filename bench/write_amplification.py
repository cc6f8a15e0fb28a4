"""B4: database statements per streamed delta, with coalescing, vs one row per delta.

A run streams one 32 KB tool-call argument as 1,000 ``TOOL_CALL_ARGS`` deltas and a
text answer as 2,000 ``TEXT_MESSAGE_CONTENT`` deltas through ``RunRecorder`` (the
production coalescing window: 50 ms / 4 KB) on PostgreSQL. Reported: statements
and rows per delta, deltas/s, whether replaying the log (``thread_replay``) gives
byte-identical arguments and text, and how long the first delta of the call waited
before it was written. Baselines in the same run: ``Event.objects.create()`` per
delta in autocommit (naive), and raw multi-VALUES INSERTs of 100 rows.

    python -m bench.write_amplification
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench.common import Row, bench_user, print_rows, save_rows, setup_django

ARG_DELTAS = 1000
TEXT_DELTAS = 2000


def _events(thread_id: str, run_id: str) -> list[dict[str, Any]]:
    payload = json.dumps({"blob": "x" * (32 * 1024 - 12)})
    size = -(-len(payload) // ARG_DELTAS)
    pieces = [payload[i * size : (i + 1) * size] for i in range(ARG_DELTAS)]
    assert "".join(pieces) == payload
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "call-b4",
            "toolCallName": "store_blob",
        },
    ]
    events += [
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call-b4", "delta": p}
        for p in pieces
        if p
    ]
    events += [
        {"type": "TOOL_CALL_END", "toolCallId": "call-b4"},
        {"type": "TEXT_MESSAGE_START", "messageId": "msg-b4", "role": "assistant"},
    ]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg-b4", "delta": f"word{i} "}
        for i in range(TEXT_DELTAS)
    ]
    events += [
        {"type": "TEXT_MESSAGE_END", "messageId": "msg-b4"},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
    ]
    return events


def coalesced(user: Any) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from threads.models import Event, Message, Run, ToolCall
    from threads.recording import RunRecorder, thread_replay
    from threads.services import thread_create

    thread = thread_create(owner=user, title="B4")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    events = _events(thread.thread_id, run.run_id)
    deltas = sum(
        1 for e in events if e["type"] in ("TOOL_CALL_ARGS", "TEXT_MESSAGE_CONTENT")
    )
    recorder = RunRecorder(run, publish=False)
    first_arg_written: float | None = None
    first_arg_fed: float | None = None
    with CaptureQueriesContext(connection) as ctx:
        start = time.perf_counter()
        for event in events:
            if event["type"] == "TOOL_CALL_ARGS" and first_arg_fed is None:
                first_arg_fed = time.perf_counter()
            written = recorder.record([event])
            if first_arg_written is None and any(
                r.type == "TOOL_CALL_ARGS" for r in written
            ):
                first_arg_written = time.perf_counter()
        recorder.flush()
        elapsed = time.perf_counter() - start
    rows = Event.objects.filter(run=run).count()
    original_call = ToolCall.objects.get(thread=thread, tool_call_id="call-b4")
    original_text = Message.objects.get(thread=thread, message_id="msg-b4").content
    payloads = list(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    replay_id = f"{thread.thread_id}-replay"
    payloads = [
        {**p, "threadId": replay_id} if "threadId" in p else p for p in payloads
    ]
    replayed = thread_replay(payloads=payloads, thread_id=replay_id, owner=user)
    replay_call = ToolCall.objects.get(thread=replayed, tool_call_id="call-b4")
    replay_text = Message.objects.get(thread=replayed, message_id="msg-b4").content
    expected_args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    identical = (
        original_call.arguments_text == replay_call.arguments_text == expected_args
        and original_text
        == replay_text
        == "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    )
    return {
        "statements": len(ctx.captured_queries),
        "rows": rows,
        "deltas": deltas,
        "events": len(events),
        "seconds": elapsed,
        "identical": identical,
        "first_wait_ms": ((first_arg_written or 0) - (first_arg_fed or 0)) * 1000,
    }


def naive(user: Any, count: int) -> float:
    """Seconds to write ``count`` deltas as one ``Event.objects.create()`` each (autocommit)."""
    from threads.models import Event, Run
    from threads.services import thread_create

    thread = thread_create(owner=user, title="B4 naive")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    start = time.perf_counter()
    for seq in range(1, count + 1):
        Event.objects.create(
            thread=thread,
            run=run,
            seq=seq,
            type="TEXT_MESSAGE_CONTENT",
            payload={
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m",
                "delta": f"word{seq} ",
            },
        )
    return time.perf_counter() - start


def raw_multivalues(user: Any, count: int) -> float:
    """Seconds to write ``count`` rows as raw multi-VALUES INSERTs of 100 rows."""
    from django.db import connection, transaction

    from threads.models import Event, Run
    from threads.services import thread_create

    thread = thread_create(owner=user, title="B4 raw")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    table = Event._meta.db_table
    start = time.perf_counter()
    for base in range(0, count, 100):
        values: list[str] = []
        params: list[int | str] = []
        for seq in range(base + 1, min(count, base + 100) + 1):
            values.append("(%s, %s, %s, %s, %s, now())")
            params += [
                thread.pk,
                run.pk,
                seq,
                "TEXT_MESSAGE_CONTENT",
                json.dumps(
                    {
                        "type": "TEXT_MESSAGE_CONTENT",
                        "messageId": "m",
                        "delta": f"word{seq} ",
                    }
                ),
            ]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (thread_id, run_id, seq, type, payload, created_at) "
                f"VALUES {', '.join(values)}",
                params,
            )
    return time.perf_counter() - start


def main() -> list[Row]:
    setup_django()
    user = bench_user()
    result = coalesced(user)
    deltas = result["deltas"]
    naive_rate = deltas / naive(user, deltas)
    raw_rate = deltas / raw_multivalues(user, deltas)
    ours_rate = deltas / result["seconds"]
    return [
        Row(
            "B4",
            "statements per delta (coalesced)",
            result["statements"] / deltas,
            1.0,
            "stmt/delta",
            target="<= 0.05",
            note="baseline = naive, 1 INSERT per delta",
        ),
        Row(
            "B4",
            "rows per delta (coalesced)",
            result["rows"] / deltas,
            1.0,
            "row/delta",
        ),
        Row(
            "B4",
            "deltas/s recorded vs naive create() per delta",
            ours_rate,
            naive_rate,
            "deltas/s",
            target=">= 10x naive",
        ),
        Row(
            "B4",
            "deltas/s recorded vs raw multi-VALUES x100",
            ours_rate,
            raw_rate,
            "deltas/s",
            note="reference",
        ),
        Row(
            "B4",
            "replay identical (1 = yes)",
            float(result["identical"]),
            1.0,
            "bool",
            target="identical",
        ),
        Row(
            "B4",
            "first args delta written after",
            result["first_wait_ms"],
            50.0,
            "ms",
            target="within the 50 ms window (baseline col)",
        ),
    ]


if __name__ == "__main__":
    rows = main()
    print_rows(rows)
    save_rows("write_amplification", rows)
