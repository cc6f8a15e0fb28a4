"""A remote agent's AG-UI interrupt, answered in that agent's own terms (IR-18, IR-05, IR-11).

AG-UI leaves the payload of a ``resume`` entry to the interrupt's
``responseSchema``, and the frameworks of the field read it differently:

- Pydantic AI (``AGUIAdapter``): ``{approved, editedArgs?: object, reason?}``;
- Microsoft Agent Framework (``agent-framework-ag-ui``): ``approved`` or its legacy
  alias ``accepted``, ``editedArgs`` with the tool's declared arguments, and *every
  tool argument as a top-level property* (an edited value for it), so a ``reason``
  there is the tool's ``reason`` argument, not an approver's note;
- LangGraph (``interrupt()`` through ``ag-ui-langgraph``): whatever the graph's
  ``responseSchema`` declares.

:func:`resume_payload` builds the payload from what the schema declares and
never writes a key the schema reads as a tool argument unless it is one;
:func:`edited_args_schema` is the remote tool's declared arguments, for
validating an operator's edit; :func:`is_tool_approval` recognises the field's
spellings of ``reason`` for a tool approval; :func:`companion_call_for` spots a
framework's companion call (Agent Framework's ``confirm_changes``) and
:func:`companion_answer` answers it by that framework's protocol. Pure functions
over JSON; no Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agentcore.tools import NAME_PATTERN, Tool, ToolError

#: ``Interrupt.reason`` values the field uses for "approve this tool call", lower
#: case: AG-UI's ``tool_call``, and the spellings of Agent Framework, LangGraph
#: HITL middleware and CopilotKit examples.
TOOL_APPROVAL_REASONS: Final = frozenset(
    {
        "tool_call",
        "tool_approval",
        "confirmation",
        "tool_confirmation",
        "approval",
        "human_approval",
        "function_approval_request",
    }
)
#: The keys a schema may use for the approve/deny boolean, in order of preference.
APPROVE_KEYS: Final = ("approved", "accepted")
#: The keys of an approval payload that are never tool arguments by themselves.
_EDITED_KEY: Final = "editedArgs"
_REASON_KEY: Final = "reason"
#: Agent Framework's companion call for a held call, answered ``{accepted, steps}``.
CONFIRM_CHANGES: Final = "confirm_changes"


def is_tool_approval(reason: object) -> bool:
    """Return whether an interrupt ``reason`` means "approve a tool call".

    Case and a framework's namespace prefix (``"langgraph:approval"``) do not
    matter. Implements IR-03 as a consumer.
    """
    if not isinstance(reason, str):
        return False
    return reason.strip().lower().rsplit(":", 1)[-1] in TOOL_APPROVAL_REASONS


def _properties(schema: object) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    return dict(properties) if isinstance(properties, Mapping) else {}


def approve_key(schema: object) -> str | None:
    """Return the key ``schema`` reads the approve/deny boolean from, or ``None``."""
    properties = _properties(schema)
    return next((key for key in APPROVE_KEYS if key in properties), None)


def offers_edits(schema: object) -> bool:
    """Return whether ``schema`` takes replacement arguments (an ``editedArgs`` property)."""
    return _EDITED_KEY in _properties(schema)


def edited_args_schema(schema: object) -> dict[str, Any] | None:
    """Return the JSON Schema of the remote tool's arguments ``schema`` declares, or ``None``.

    That is the ``editedArgs`` property when it declares ``properties`` (Agent
    Framework); a bare ``{"type": "object"}`` (Pydantic AI) declares nothing.
    """
    edited = _properties(schema).get(_EDITED_KEY)
    if isinstance(edited, Mapping) and isinstance(edited.get("properties"), Mapping):
        return dict(edited)
    return None


def tool_argument_names(
    schema: object, tool_arguments: Mapping[str, Any] | None
) -> set[str]:
    """Return the names a remote reads as tool arguments: the call's, and the declared ones."""
    names = set(tool_arguments or {})
    declared = edited_args_schema(schema)
    if declared is not None:
        names |= set(declared["properties"])
    return names


def resume_payload(
    *,
    schema: object,
    approved: bool,
    edited_args: Mapping[str, Any] | None = None,
    reason: str = "",
    tool_arguments: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Return the ``resume[].payload`` answering a tool-approval interrupt, or ``None``.

    ``schema`` is the interrupt's ``responseSchema``; ``tool_arguments`` the held
    call's arguments. The payload has the approve key the schema declares
    (``approved``, else ``accepted``) set to ``approved``; ``editedArgs`` when an
    edit is given and declared; ``reason`` only when the schema declares it and
    no tool argument has that name (an approver's note must never become a tool
    argument). ``None`` when the schema declares no approve key: the answer is
    then an operator's ``response``, not a decision. Raises :class:`ValueError`
    when ``edited_args`` is given and the schema offers no ``editedArgs``.
    Implements IR-05, IR-11, IR-18.
    """
    key = approve_key(schema)
    if key is None:
        return None
    properties = _properties(schema)
    payload: dict[str, Any] = {key: approved}
    if approved and edited_args is not None:
        if not offers_edits(schema):
            raise ValueError(
                "the remote agent's responseSchema offers no 'editedArgs': approve "
                "the call as proposed or reject it"
            )
        payload[_EDITED_KEY] = dict(edited_args)
    if (
        reason
        and _REASON_KEY in properties
        and not _reads_as_argument(_REASON_KEY, schema, tool_arguments)
    ):
        payload[_REASON_KEY] = reason
    return payload


def _reads_as_argument(
    key: str, schema: object, tool_arguments: Mapping[str, Any] | None
) -> bool:
    """Return whether ``schema`` reads its top-level ``key`` as the tool argument ``key``.

    That is when the tool has an argument of that name and the schema lists the
    tool's arguments at its top level (Agent Framework: another argument stands
    there too, or ``key`` is the tool's only argument). A schema that keeps the
    arguments under ``editedArgs`` (LangGraph's, Pydantic AI's) reads a top-level
    ``reason`` as the approver's.
    """
    names = tool_argument_names(schema, tool_arguments)
    if key not in names:
        return False
    others = names - {key}
    return not others or bool(others & set(_properties(schema)))


def companion_call_for(
    *, name: str, arguments: object, held_ids: Iterable[str]
) -> str | None:
    """Return the held call id a framework companion call stands beside, or ``None``.

    A companion is a call a framework adds next to a held one for clients of its
    own protocol: Agent Framework's ``confirm_changes``, whose arguments name the
    held call as ``function_call_id``. Implements DC-04 for such calls.
    """
    if name != CONFIRM_CHANGES:
        return None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    target = arguments.get("function_call_id")
    return target if isinstance(target, str) and target in set(held_ids) else None


def companion_answer(*, arguments: object, approved: bool) -> str:
    """Return the tool result answering a ``confirm_changes`` companion call.

    Agent Framework's protocol: ``{"accepted": <bool>, "steps": [...]}``, the
    steps of the call's arguments with each ``status`` ``"enabled"`` when
    approved, ``"disabled"`` when not.
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    raw_steps = arguments.get("steps") if isinstance(arguments, Mapping) else None
    status = "enabled" if approved else "disabled"
    steps = [
        {**step, "status": status}
        for step in raw_steps or []
        if isinstance(step, Mapping)
    ]
    return json.dumps({"accepted": approved, "steps": steps})


def remote_tool(*, name: str, schema: object) -> Tool:
    """Return a :class:`Tool` standing for a remote agent's tool, to validate an edit.

    Its parameters are the arguments the interrupt declares
    (:func:`edited_args_schema`), else any object: the remote runs the tool,
    Countersign only checks an operator's replacement arguments through the
    same ladder as a model's (SEC-02, IR-11). It cannot be executed here.
    """
    declared = edited_args_schema(schema)
    parameters = declared if declared is not None else {"type": "object"}
    parameters.pop("description", None)
    safe = name if NAME_PATTERN.fullmatch(name or "") else "remote_tool"
    return Tool(
        name=safe,
        description=f"the remote agent's tool {name!r}",
        parameters=parameters,
        execute=_not_here,
    )


def _not_here(params: Mapping[str, Any], context: Any) -> Any:
    raise ToolError("a remote agent's tool runs at that agent, not in Countersign")


#: ``CUSTOM`` event names of the frameworks' own interrupt machinery, lower case:
#: Agent Framework's ``function_approval_request``, ag-ui-langgraph's legacy
#: ``on_interrupt``. Countersign's clients get Countersign's interrupts instead.
REMOTE_INTERRUPT_EVENTS: Final = frozenset(
    {"function_approval_request", "on_interrupt", "oninterrupt", "interrupt"}
)
#: The namespace a relayed ``CUSTOM`` event without one is given.
REMOTE_NAMESPACE: Final = "remote."


def relayed_custom_name(name: str) -> str | None:
    """Return the name a remote's ``CUSTOM`` event is relayed under, or ``None`` to drop it.

    The remote's interrupt machinery (:data:`REMOTE_INTERRUPT_EVENTS`) is dropped:
    it carries the remote's own interrupt ids, which never reach Countersign's
    clients (IR-18; docs/agui.md). A name without a namespace (``.``, ``:`` or
    ``/``) gets :data:`REMOTE_NAMESPACE`, so a client can tell a relayed event
    from one of its own agent's.
    """
    if name.strip().lower() in REMOTE_INTERRUPT_EVENTS:
        return None
    if any(mark in name for mark in ".:/"):
        return name
    return REMOTE_NAMESPACE + name


def raw_mentions_interrupt(value: object) -> bool:
    """Return whether a remote's ``RAW`` event payload ``value`` shows its interrupt machinery.

    ag-ui-langgraph relays LangGraph's own callback events as ``RAW``; those of an
    interrupted graph carry ``__interrupt__`` with LangGraph's interrupt id, which
    never reaches Countersign's clients (IR-18). Any mention of an interrupt
    counts: a false positive only drops a framework's debug event.
    """
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        return True
    return "interrupt" in text.lower()


def interrupt_tool_call_id(interrupt: Mapping[str, Any]) -> str | None:
    """Return the ``toolCallId`` a remote's interrupt holds, or ``None``.

    ``interrupt`` is AG-UI ``Interrupt`` JSON (camelCase). Its ``toolCallId``
    when set; else, for a tool-approval reason (:func:`is_tool_approval`), the
    call id a framework keeps in ``metadata``: Agent Framework's
    ``agent_framework.function_call.call_id``, or the raw ``interrupt()`` value
    ag-ui-langgraph keeps (``langgraph.raw.toolCallId`` / ``tool_call_id`` /
    ``tool_call.id``). Implements IR-18 with the field's spellings.
    """
    given = interrupt.get("toolCallId")
    if isinstance(given, str) and given:
        return given
    if not is_tool_approval(interrupt.get("reason")):
        return None
    metadata = interrupt.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    candidates: list[Any] = []
    framework = metadata.get("agent_framework")
    if isinstance(framework, Mapping):
        call = framework.get("function_call")
        if isinstance(call, Mapping):
            candidates.append(call.get("call_id"))
    langgraph = metadata.get("langgraph")
    raw = langgraph.get("raw") if isinstance(langgraph, Mapping) else None
    for source in (raw, metadata):
        if isinstance(source, Mapping):
            candidates += [source.get("toolCallId"), source.get("tool_call_id")]
            call = source.get("tool_call")
            if isinstance(call, Mapping):
                candidates.append(call.get("id"))
    return next((c for c in candidates if isinstance(c, str) and c), None)
