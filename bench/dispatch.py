"""B3: per-tool-call dispatch overhead of agentcore.loop vs a bare Chat-Completions loop.

(a) In memory: a scripted turn with K calls to a no-op agent-side tool, then a text
turn; per-call cost = (time(K) - time(0)) / K, median of repetitions. Baseline: the
same calls as Chat Completions ``tool_calls`` dicts handled with ``json.loads``, a
cached ``Draft202012Validator.is_valid``, a dict lookup, a function call and a
``tool`` message dict. (b) The same runs recorded through ``RunRecorder`` on
PostgreSQL: statements per call, counted with ``CaptureQueriesContext``.

    python -m bench.dispatch
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from bench.common import Row, median, print_rows, save_rows, setup_django

KS = (1, 10, 100)
REPEAT = 41

SCHEMA = {
    "type": "object",
    "properties": {"i": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["i"],
    "additionalProperties": False,
}


def _noop_tool(*, sync: bool = False) -> Any:
    """A no-op agent-side tool; ``sync=True`` makes the loop run it in a worker thread."""
    from agentcore.tools import ToolOutput, define_tool

    async def noop(params: dict[str, Any], context: Any) -> Any:
        return ToolOutput(content="ok")

    return define_tool(
        name="noop",
        description="Do nothing.",
        parameters=SCHEMA,
        execute=(lambda params, context: ToolOutput(content="ok")) if sync else noop,
    )


def provider_only(k: int) -> float:
    """Median seconds the scripted provider alone takes to stream the K-call run's turns.

    Every turn of the script: the loop plays them all (the K-call turn, then the
    text turn), so the text turn's streaming is the provider's too, not the loop's.
    """
    from agentcore.providers.base import ModelRequest
    from agentcore.providers.scripted import ScriptedProvider

    async def samples() -> list[float]:
        taken = []
        for _ in range(REPEAT):
            provider = ScriptedProvider(_script(k))
            start = time.perf_counter()
            while provider.remaining:
                async for _ in provider.stream_turn(
                    ModelRequest(model="scripted", messages=[], tools=[])
                ):
                    pass
            taken.append(time.perf_counter() - start)
        return taken

    return median(asyncio.run(samples()))


def _script(k: int) -> list[Any]:
    from agentcore.providers.scripted import text, tool_call, turn

    turns = []
    if k:
        turns.append(
            turn(*(tool_call("noop", {"i": i, "note": "x"}) for i in range(k)))
        )
    turns.append(text("done"))
    return turns


def _run_input(thread_id: str = "t", run_id: str | None = None) -> Any:
    from agentcore.events import RunAgentInput

    return RunAgentInput.model_validate(
        {
            "threadId": thread_id,
            "runId": run_id or uuid.uuid4().hex,
            "state": {},
            "messages": [{"id": "u1", "role": "user", "content": "go"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )


def loop_events(k: int, toolset: Any, run_input: Any = None) -> list[Any]:
    from agentcore.loop import LoopAgent
    from agentcore.providers.scripted import ScriptedProvider

    agent = LoopAgent(ScriptedProvider(_script(k)), toolset=toolset, model="scripted")

    async def collect() -> list[Any]:
        return [e async for e in agent.run(run_input or _run_input())]

    return asyncio.run(collect())


def time_loop(k: int, toolset: Any) -> float:
    """Median seconds of one K-call run, all samples on one event loop.

    One loop for all samples: a fresh ``asyncio.run`` per sample adds a loop's
    set-up and tear-down (milliseconds, and noisy on a shared machine) to every
    sample, which the K=0 subtraction removes only on average.
    """
    from agentcore.loop import LoopAgent
    from agentcore.providers.scripted import ScriptedProvider

    async def samples() -> list[float]:
        taken = []
        for _ in range(REPEAT):
            agent = LoopAgent(
                ScriptedProvider(_script(k)), toolset=toolset, model="scripted"
            )
            run_input = _run_input()
            start = time.perf_counter()
            async for _event in agent.run(run_input):
                pass
            taken.append(time.perf_counter() - start)
        return taken

    return median(asyncio.run(samples()))


def bare_loop(k: int) -> float:
    """Median seconds for K calls through the bare Chat-Completions-shaped loop."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(SCHEMA)
    tools = {"noop": lambda params: "ok"}
    response: dict[str, Any] = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {
                                "name": "noop",
                                "arguments": json.dumps({"i": i, "note": "x"}),
                            },
                        }
                        for i in range(k)
                    ],
                }
            }
        ]
    }
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        messages = []
        for call in response["choices"][0]["message"]["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            if not validator.is_valid(args):
                raise AssertionError(args)
            result = tools[call["function"]["name"]](args)
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": result}
            )
        samples.append(time.perf_counter() - start)
    return median(samples)


def queries_per_call(toolset: Any) -> dict[int, float]:
    """Statements recorded per call on PostgreSQL: (queries(K) - queries(0)) / K."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.common import bench_user
    from threads.models import Run
    from threads.recording import RunRecorder
    from threads.services import thread_create

    user = bench_user()
    counts: dict[int, int] = {}
    for k in (0, *KS):
        thread = thread_create(owner=user, title=f"B3 k={k}")
        run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
        events = loop_events(k, toolset, _run_input(thread.thread_id, run.run_id))
        recorder = RunRecorder(run, publish=False)
        with CaptureQueriesContext(connection) as ctx:
            recorder.record(events)
            recorder.flush()
        counts[k] = len(ctx.captured_queries)
    return {k: (counts[k] - counts[0]) / k for k in KS}


def main() -> list[Row]:
    setup_django()
    from agentcore.tools import Toolset

    toolset = Toolset.assemble([_noop_tool()])
    sync_toolset = Toolset.assemble([_noop_tool(sync=True)])
    loop_events(3, toolset)  # warm-up
    zero = time_loop(0, toolset)
    provider_zero = provider_only(0)
    rows = []
    for k in KS:
        total = (time_loop(k, toolset) - zero) / k * 1e6
        model = (provider_only(k) - provider_zero) / k * 1e6
        base = bare_loop(k) / k * 1e6
        rows.append(
            Row(
                "B3",
                f"loop per-call, K={k}, async tool (in-memory)",
                total - model,
                base,
                "us/call",
                target="<= 2x bare (~120 us)",
                note=f"scripted provider's own {model:.0f} us/call excluded",
            )
        )
    k = 10
    sync_total = (time_loop(k, sync_toolset) - time_loop(0, sync_toolset)) / k * 1e6
    rows.append(
        Row(
            "B3",
            f"loop per-call, K={k}, sync tool (thread hop)",
            sync_total - (provider_only(k) - provider_zero) / k * 1e6,
            bare_loop(k) / k * 1e6,
            "us/call",
            note="sync execute runs in a thread",
        )
    )
    per_call = queries_per_call(toolset)
    for k in KS:
        rows.append(
            Row(
                "B3",
                f"statements per call recorded, K={k} (PostgreSQL)",
                per_call[k],
                2.0,
                "stmt/call",
                target="<= 2 per call (baseline col = target)",
            )
        )
    return rows


if __name__ == "__main__":
    result = main()
    print_rows(result)
    save_rows("dispatch", result)
