"""Reading an AG-UI stream with ``ag-ui-validate`` (PyPI, 0.4.0), for any test to call.

``ag-ui-validate`` is a third-party conformance validator: a rule catalog
(``AGUI001``…``AGUI903``), each finding citing its spec section. It was written
against the 0.x spec ("Only "0.x" exists today", ``ValidatorOptions.spec``), so a
few of its rules check what AG-UI 1.0 changed. Those, and only those, are relaxed
here, each with the 1.0 text that changed it (``../shared/spec/AGUI-1.0.md``):

- :data:`RULES_OFF` — switched off entirely (``severity_overrides``);
- :data:`RULES_NARROWED` — kept on, with only the findings of the case 1.0 made
  legal dropped (a predicate per rule), so the rest of the rule still applies;
- reopening (``AGUI205`` / ``AGUI104`` on a *closed* id): 1.0 says "A closed call,
  like a closed message, MAY be reopened by a new TOOL_CALL_START with the same
  toolCallId, and further arguments append" (AGUI-1.0.md §2.2; RULES.md TC-06),
  while the validator flags it and then every continuation of it. The validator
  is shown each reopened segment under an alias id (:func:`reopened_as_new`), so
  starting an id that is still *open* (fatal in 1.0 too) is still a finding.

Every other rule is on at its own severity. Because ``AGUI504`` (schema) knows only
the 0.x shapes, every event is also parsed with the ``ag-ui-protocol`` 1.0 models
(the 1.0 schema, AGUI-1.0.md §1), so the relaxed schema check is replaced by the
1.0 one rather than dropped.

Use :func:`assert_valid_stream` with the raw SSE body of a response (the framing is
checked too: ``AGUI501``, ``AGUI505``) or a list of event objects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ag_ui_validate import Diagnostic, ValidatorOptions
from ag_ui_validate.transport import TransportOptions, validate_body
from pydantic import ValidationError

from agentcore.events import event_from_dict

__all__ = [
    "RULES_NARROWED",
    "RULES_OFF",
    "assert_valid_stream",
    "reopened_as_new",
    "stream_findings",
]

#: Rules switched off: AG-UI 1.0 says the opposite of what they check.
RULES_OFF: dict[str, str] = {
    "AGUI204": (
        "Tool call arguments are not valid JSON. AG-UI 1.0 carries argument *text* "
        "and does not validate it: 'TOOL_CALL_END: closing establishes completeness, "
        "not validity; unparsable arguments are the application's problem, not a "
        "protocol violation' (AGUI-1.0.md §2.2; RULES.md TC-03, TC-05)."
    ),
    "AGUI105": (
        "Empty content delta (a warning). In 1.0 TEXT_MESSAGE_CONTENT's delta "
        "'may be \"\"' (AGUI-1.0.md §1.2)."
    ),
}


def _index_type(events: Sequence[dict[str, Any] | None], index: int | None) -> str:
    if index is None or not 0 <= index < len(events):
        return ""
    event = events[index]
    return str(event.get("type", "")) if isinstance(event, dict) else ""


_Narrowing = Callable[[Diagnostic, Sequence[dict[str, Any] | None]], bool]


def _answers_a_held_call(
    diagnostic: Diagnostic, events: Sequence[dict[str, Any] | None]
) -> bool:
    """Whether the flagged TOOL_CALL_RESULT answers a call an interrupt held.

    That is a call started in an earlier run of the stream which finished with the
    interrupt outcome, or any call when the result's own run resumes interrupts
    (its ``RUN_STARTED.input.resume`` is not empty: the held calls were started in
    a stream the client read before). A run that ended ``RUN_ERROR`` code
    ``outcome_unknown`` holds its calls the same way: it told the client that an
    operator establishes their outcome, which a later run then reports
    (docs/agui.md "Outcome unknown").
    """
    if diagnostic.event_type != "TOOL_CALL_RESULT" or diagnostic.event_index is None:
        return False
    result = events[diagnostic.event_index] or {}
    held: set[str] = set()
    started: set[str] = set()
    resuming = False
    for event in events[: diagnostic.event_index]:
        kind = (event or {}).get("type")
        if kind == "RUN_STARTED":
            started = set()
            resuming = bool(((event or {}).get("input") or {}).get("resume"))
        elif kind == "TOOL_CALL_START":
            started.add(str((event or {}).get("toolCallId")))
        elif kind == "RUN_FINISHED":
            outcome = (event or {}).get("outcome") or {}
            if outcome.get("type") == "interrupt":
                held |= started
        elif kind == "RUN_ERROR" and (event or {}).get("code") == "outcome_unknown":
            held |= started
    return resuming or str(result.get("toolCallId")) in held


#: Rules kept on but narrowed: ``(why, drop)``; ``drop(diagnostic, events)`` is true
#: only for the case AG-UI 1.0 made legal.
RULES_NARROWED: dict[str, tuple[str, _Narrowing]] = {
    "AGUI504": (
        "Schema of TOOL_CALL_RESULT.content, which 0.x types as a string. In 1.0 "
        "'Result content MUST be a string or an ordered list of ContentParts' "
        "(AGUI-1.0.md §1.2, §2.2; RULES.md TC-10): a list there is dropped here and "
        "checked against the 1.0 models instead.",
        lambda d, events: (
            d.event_type == "TOOL_CALL_RESULT"
            and d.pointer == "/content"
            and isinstance((events[d.event_index] or {}).get("content"), list)
        ),
    ),
    "AGUI207": (
        "TOOL_CALL_RESULT for a call never started in this run. AG-UI 1.0 adds "
        "interrupts: a run that holds calls ends with the interrupt outcome and a "
        "later run, whose input resumes it, answers them (AGUI-1.0.md §2.3, §2.4 "
        "'Interrupts'; the official client accepts a result for an id it has not "
        "seen in the run, §3.3): only results of calls an interrupt held are "
        "dropped.",
        _answers_a_held_call,
    ),
    "AGUI001": (
        "Run does not start with RUN_STARTED. In 1.0 'A stream MUST begin with "
        "RUN_STARTED or RUN_ERROR' (AGUI-1.0.md §2.4): only a first RUN_ERROR is "
        "dropped.",
        lambda d, events: d.event_index == 0 and d.event_type == "RUN_ERROR",
    ),
    "AGUI005": (
        "RUN_FINISHED and RUN_ERROR are mutually exclusive. In 1.0 'After "
        "RUN_FINISHED only RUN_STARTED (new run) or a late RUN_ERROR may follow' "
        "(AGUI-1.0.md §2.4): only a RUN_ERROR after RUN_FINISHED is dropped.",
        lambda d, events: (
            d.event_type == "RUN_ERROR"
            and _index_type(events, d.related_event_index) == "RUN_FINISHED"
        ),
    ),
}


#: ag-ui-validate's info rules a stream of a remote agent's run must be clean of too
#: (pass as ``also=``): a parentMessageId naming an unknown message, no timestamps,
#: an un-namespaced CUSTOM event.
HYGIENE = ("AGUI208", "AGUI902", "AGUI903")

#: Rules about the body's framing (read from the body as sent).
_FRAMING_RULES = frozenset({"AGUI501", "AGUI502", "AGUI505"})


def _relaxed(diagnostic: Diagnostic, events: Sequence[dict[str, Any] | None]) -> bool:
    narrowed = RULES_NARROWED.get(diagnostic.rule)
    return narrowed is not None and narrowed[1](diagnostic, events)


async def _body(raw: bytes) -> AsyncIterator[bytes]:
    yield raw


def _payloads(raw: bytes) -> list[dict[str, Any] | None]:
    """Return each SSE frame's ``data`` as an object (``None`` where it is not one)."""

    out: list[dict[str, Any] | None] = []
    for frame in raw.decode("utf-8", errors="replace").split("\n\n"):
        data = [
            line[5:].lstrip(" ")
            for line in frame.split("\n")
            if line.startswith("data:")
        ]
        if not data:
            continue
        try:
            parsed = json.loads("\n".join(data))
        except ValueError:
            out.append(None)
            continue
        out.append(parsed if isinstance(parsed, dict) else None)
    return out


_OPENERS = {"TOOL_CALL_START": "toolCallId", "TEXT_MESSAGE_START": "messageId"}
_CONTINUERS = {
    "TOOL_CALL_ARGS": "toolCallId",
    "TOOL_CALL_END": "toolCallId",
    "TEXT_MESSAGE_CONTENT": "messageId",
    "TEXT_MESSAGE_END": "messageId",
}
_CLOSERS = {"TOOL_CALL_END", "TEXT_MESSAGE_END"}


def reopened_as_new(
    events: Sequence[dict[str, Any] | None],
) -> tuple[list[dict[str, Any] | None], bool]:
    """Return ``events`` with each reopened item's segment under an alias id, and whether any.

    A ``TOOL_CALL_START`` (``TEXT_MESSAGE_START``) naming an id closed earlier in
    the run reopens it (TC-06); that segment, up to its END, gets the id
    ``<id>~reopen<n>``. Everything else is unchanged; tracking resets at
    ``RUN_STARTED`` (AGUI-1.0.md §2.4).
    """
    out: list[dict[str, Any] | None] = []
    open_ids: set[tuple[str, str]] = set()
    closed: set[tuple[str, str]] = set()
    alias: dict[tuple[str, str], str] = {}
    count = 0
    for event in events:
        if event is None:
            out.append(event)
            continue
        kind = event.get("type")
        if kind == "RUN_STARTED":
            open_ids, closed, alias = set(), set(), {}
        field = _OPENERS.get(str(kind)) or _CONTINUERS.get(str(kind))
        item = event.get(field) if field else None
        if field is None or not isinstance(item, str):
            out.append(event)
            continue
        key = (field, item)
        if kind in _OPENERS and key in closed and key not in open_ids:
            count += 1
            alias[key] = f"{item}~reopen{count}"
        if kind in _OPENERS:
            open_ids.add(key)
        if key in alias:
            event = {**event, field: alias[key]}
        if kind in _CLOSERS and key in open_ids:
            open_ids.discard(key)
            closed.add(key)
            alias.pop(key, None)
        out.append(event)
    return out, count > 0


def stream_findings(
    stream: bytes | Sequence[dict[str, Any]],
    *,
    content_type: str | None = "text/event-stream",
    features: list[str] | None = None,
    also: Sequence[str] = (),
) -> list[str]:
    """Return the error-severity findings for ``stream``, one line each (empty: valid).

    ``stream`` is a response body (SSE bytes, framing checked; ``content_type`` is
    the response's, ``None`` when unknown) or a list of AG-UI event objects. The
    validator runs with :data:`RULES_OFF` off and :data:`RULES_NARROWED` narrowed;
    each event is also parsed with the AG-UI 1.0 models (a failure is a finding
    named ``AG-UI-1.0-schema``). Internal validator errors are findings too.
    ``also`` names rules reported whatever their severity (the hygiene ones:
    ``AGUI208``, ``AGUI902``, ``AGUI903`` are ``info``).
    """
    if isinstance(stream, bytes | bytearray):
        raw = bytes(stream)
        events = _payloads(raw)
    else:
        events = [dict(e) for e in stream]
        raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    options = TransportOptions(
        validator=ValidatorOptions(
            features=features,
            severity_overrides=dict.fromkeys(RULES_OFF, "off"),
        ),
        recorded=True,
    )
    # A test may call this from inside its event loop: validate on a thread of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(
            asyncio.run, _validate(raw, content_type, options)
        ).result()
    report = result.report
    diagnostics = report.diagnostics
    reshown, reopened = reopened_as_new(events)
    if reopened:
        # Framing from the body as sent; the rules over events from the aliased copy.
        aliased = "".join(
            f"data: {json.dumps(e)}\n\n" for e in reshown if e is not None
        ).encode()
        with ThreadPoolExecutor(max_workers=1) as pool:
            again = pool.submit(
                asyncio.run, _validate(aliased, content_type, options)
            ).result()
        diagnostics = [d for d in diagnostics if d.rule in _FRAMING_RULES] + [
            d for d in again.report.diagnostics if d.rule not in _FRAMING_RULES
        ]
        events = reshown
    lines = [
        f"{d.rule} [{d.severity}] event {d.event_index} ({d.event_type}): {d.message}"
        f" — {d.spec_url}"
        for d in diagnostics
        if (d.severity == "error" or d.rule in also) and not _relaxed(d, events)
    ]
    lines += [f"internal validator error: {e}" for e in report.internal_errors]
    for index, event in enumerate(events):
        if event is None:
            continue
        try:
            event_from_dict(event)
        except ValidationError as error:
            lines.append(
                f"AG-UI-1.0-schema event {index} ({event.get('type')}): {error}"
            )
    return lines


async def _validate(
    raw: bytes, content_type: str | None, options: TransportOptions
) -> Any:
    return await validate_body(_body(raw), content_type, options)


def assert_valid_stream(
    stream: bytes | Sequence[dict[str, Any]],
    *,
    content_type: str | None = "text/event-stream",
    what: str = "the stream",
    also: Sequence[str] = (),
) -> None:
    """Fail unless ``ag-ui-validate`` (as relaxed above) finds no error in ``stream``.

    See :func:`stream_findings` for the arguments. The failure lists every finding
    with its rule, event index and spec URL.
    """
    findings = stream_findings(stream, content_type=content_type, also=also)
    assert not findings, f"ag-ui-validate found errors in {what}:\n" + "\n".join(
        findings
    )
