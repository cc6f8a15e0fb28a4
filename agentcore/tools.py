"""The tool contract, per-turn tool assembly and the deferred-tool search.

A :class:`Tool` is built by :func:`define_tool` (or the :func:`tool` decorator, which
only returns a :class:`Tool`). Its JSON-Schema validator is compiled once, when the
tool is defined: a cached validator is ~70x faster than ``jsonschema.validate``
per call. Which tools a turn offers is an explicit, ordered :class:`Toolset`
assembled from the sources available to that turn: there is no global
registry and no discovery (RT-03).

This module never imports Django.

Over 400 lines because it holds the tool contract, its definer and the per-turn
Toolset assembly with deferred-tool search; all are the one public surface tools are
written against.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import string
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from agentcore.policy import (
    PolicyContext,
    PolicyDecision,
    PolicyError,
    decision_from,
    policy_evaluate,
)
from agentcore.providers.base import ToolSpec

if TYPE_CHECKING:
    import ag_ui.core
    from jsonschema import Draft202012Validator
    from pydantic import BaseModel

__all__ = [
    "NAME_PATTERN",
    "SEARCH_TOOLS_NAME",
    "ErrorType",
    "ExecuteFn",
    "ExecutionMode",
    "Policy",
    "PolicyFn",
    "RunsOn",
    "Tool",
    "ToolCancelled",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolOutput",
    "ToolPermissionDenied",
    "ToolTimeout",
    "ToolUpstreamUnavailable",
    "Toolset",
    "define_tool",
    "tool",
]

logger = logging.getLogger(__name__)

ExecutionMode = Literal["parallel", "sequential"]
RunsOn = Literal["agent", "application"]
Policy = Literal["auto", "require_approval", "deny"]
#: A policy callable: ``(params)`` or ``(params, context)`` (see :mod:`agentcore.policy`).
PolicyFn: TypeAlias = Callable[..., Any]
#: Sanitized error types a tool result may carry (SEC-06). ``arguments_truncated``
#: and ``unknown_tool`` are refinements of "bad arguments" used by the cases.
ErrorType = Literal[
    "invalid_arguments",
    "invalid_arguments_json",
    "arguments_truncated",
    "unknown_tool",
    "permission_denied",
    "timeout",
    "upstream_unavailable",
    "cancelled",
    "tool_error",
]

#: The names every provider accepts for a function tool.
NAME_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: The tool that stands in front of deferred tools (RT-01 ``deferLoading``).
SEARCH_TOOLS_NAME: Final = "search_tools"

_EMPTY_OBJECT_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}
_POLICIES: Final = frozenset(get_args(Policy))
_MODES: Final = frozenset(get_args(ExecutionMode))
_RUNS_ON: Final = frozenset(get_args(RunsOn))


class ToolDefinitionError(ValueError):
    """A tool or a turn's tool list is defined wrongly; the message names the tool and the fix."""


class ToolError(Exception):
    """Base of the exceptions a tool raises to choose its sanitized error type (SEC-06).

    ``str(error)`` is shown to the model after secret scrubbing, so it must be an
    actionable sentence (RT-09): what failed, why, what to do next.
    """

    error_type: ErrorType = "tool_error"


class ToolInputError(ToolError):
    """The validated arguments are still unacceptable (unknown order, amount too large)."""

    error_type: ErrorType = "invalid_arguments"


class ToolPermissionDenied(ToolError):
    """The caller may not do this; retrying will not help."""

    error_type: ErrorType = "permission_denied"


class ToolUpstreamUnavailable(ToolError):
    """A service the tool depends on failed transiently; a later retry may work."""

    error_type: ErrorType = "upstream_unavailable"


class ToolTimeout(ToolError):
    """The tool gave up waiting on something (its own deadline)."""

    error_type: ErrorType = "timeout"


class ToolCancelled(ToolError):
    """The tool stopped because the run was cancelled."""

    error_type: ErrorType = "cancelled"


@dataclass(frozen=True)
class ToolOutput:
    """What :meth:`Tool.execute` returns (RT-02).

    ``content`` is what the model sees: a string or a list of AG-UI content-part dicts
    (TC-10). ``details`` is structured data for logs and the operator UI, never sent
    to the model. ``events`` are optional presentation events (AG-UI event models or
    dicts) for the stream. ``end_turn`` asks the loop to stop after this batch.
    Implements RT-02.
    """

    content: str | list[dict[str, Any]]
    details: dict[str, Any] | None = None
    events: Sequence[Any] = ()
    end_turn: bool = False


@dataclass
class ToolContext:
    """Where a call runs: ids, the idempotency key, the user, and the abort signal.

    ``idempotency_key`` is stable across retries of one call (LP-07); ``cancel`` is the
    call's own abort signal (RT-01), set when this call times out or the run is
    cancelled; dispatch gives every call its own event, never the run's; ``user`` is
    whatever the caller authenticated, for the tool's own use (the caller checks
    ``Tool.permission`` before executing). ``extras`` carries caller-specific values.
    """

    thread_id: str
    run_id: str
    tool_call_id: str
    idempotency_key: str
    user: object | None = None
    cancel: asyncio.Event | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: Asks a human for more input mid-call (an MCP elicitation): called, blocking,
    #: with ``(message, json_schema, timeout_seconds)``; returns ``(action, content)``
    #: with action ``"accept"`` (content: the answer), ``"decline"`` or ``"cancel"``.
    #: ``None``: nobody can be asked, so such requests are declined.
    input_requester: InputRequester | None = None


InputRequester: TypeAlias = Callable[
    [str, dict[str, Any], float], tuple[str, "dict[str, Any] | None"]
]
ExecuteFn: TypeAlias = Callable[
    [dict[str, Any], ToolContext],
    "ToolOutput | Awaitable[Any] | Any",
]
ActivityLabel: TypeAlias = "str | Callable[[dict[str, Any]], str] | None"
CompletedLabel: TypeAlias = "str | Callable[[dict[str, Any], ToolOutput], str] | None"


@dataclass(frozen=True, slots=True)
class CallReview:
    """How a call reads to the person deciding it, and what they should know first.

    ``summary``: one sentence ("Refund 25.00 EUR on order A-1001"); ``facts``:
    ``(label, value)`` pairs the call rests on ("Order total", "500.00 EUR");
    ``warnings``: pre-decision checks that failed, as sentences ("25.00 EUR
    exceeds what is left to refund (10.00 EUR)"): a call with a warning is one
    the tool would refuse or should not run as proposed.
    """

    summary: str
    facts: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """Return ``{"summary", "facts": [{"label", "value"}], "warnings": [str]}``."""
        return {
            "summary": self.summary,
            "facts": [{"label": k, "value": v} for k, v in self.facts],
            "warnings": list(self.warnings),
        }


ReviewFn: TypeAlias = "Callable[[dict[str, Any]], CallReview] | None"


def _format_label(template: str, values: Mapping[str, Any], fallback: str) -> str:
    """Fill ``{name}`` fields of ``template`` from ``values``; return ``fallback`` if one is missing."""
    try:
        return string.Formatter().vformat(template, (), dict(values))
    except (KeyError, IndexError, ValueError, AttributeError):
        return fallback


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool: what the model is told, how calls are checked, and how it runs.

    Fields (RT-01, LP-05): ``name`` (``^[a-zA-Z0-9_-]{1,64}$``), ``description``,
    ``parameters`` (a JSON Schema object whose root is ``"type": "object"``; a
    passthrough schema is kept exactly as given), ``strict``, ``namespace`` and
    ``namespace_description``, ``defer_loading``, ``execution_mode``,
    ``is_read_only``, ``is_destructive``; ``runs_on`` (``agent``: answered in-stream;
    ``application``: advertised in ``RunAgentInput.tools`` and left pending), ``policy``
    (``auto | require_approval | deny`` or a callable of the validated params; a
    destructive tool defaults to ``require_approval``), ``timeout`` in seconds,
    ``max_result_bytes`` in UTF-8 bytes, ``idempotent``, and ``permission``, the
    Django permission string a caller needs (checked by the caller).

    ``execute(params, context)`` receives validated params only (RT-05) and may be
    sync or async; it returns a :class:`ToolOutput`, a string, a list of parts, or
    any JSON-serializable value (serialized to compact JSON, TC-11).

    Raises :class:`ToolDefinitionError` when a field is invalid (RT-04).
    Implements RT-01, RT-02, RT-04, LP-05.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: ExecuteFn = field(repr=False, compare=False)
    strict: bool = False
    namespace: str | None = None
    namespace_description: str | None = None
    defer_loading: bool = False
    execution_mode: ExecutionMode = "sequential"
    is_read_only: bool = False
    is_destructive: bool = False
    runs_on: RunsOn = "agent"
    policy: Policy | PolicyFn | PolicyDecision | Mapping[str, Any] | None = None
    timeout: float = 30.0
    max_result_bytes: int = 64 * 1024
    idempotent: bool = False
    permission: str | None = None
    activity: ActivityLabel = field(default=None, repr=False, compare=False)
    completed_activity: CompletedLabel = field(default=None, repr=False, compare=False)
    review: ReviewFn = field(default=None, repr=False, compare=False)
    params_model: type[BaseModel] | None = field(default=None, repr=False)
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Check every field and compile the validator once. Implements RT-04."""
        name = self.name
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ToolDefinitionError(
                f"tool name {name!r} is refused by providers; use 1-64 characters "
                "from a-z, A-Z, 0-9, '_' and '-'"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolDefinitionError(
                f"tool {name!r} has no description; say what it does and when to use it"
            )
        if not callable(self.execute):
            raise ToolDefinitionError(f"tool {name!r}: execute must be callable")
        if self.namespace is not None and not NAME_PATTERN.fullmatch(self.namespace):
            raise ToolDefinitionError(
                f"tool {name!r}: namespace {self.namespace!r} must match "
                f"{NAME_PATTERN.pattern}"
            )
        if self.namespace_description is not None and self.namespace is None:
            raise ToolDefinitionError(
                f"tool {name!r}: namespace_description given without a namespace"
            )
        if self.execution_mode not in _MODES:
            raise ToolDefinitionError(
                f"tool {name!r}: execution_mode {self.execution_mode!r} must be one "
                f"of {sorted(_MODES)}"
            )
        if self.runs_on not in _RUNS_ON:
            raise ToolDefinitionError(
                f"tool {name!r}: runs_on {self.runs_on!r} must be one of {sorted(_RUNS_ON)}"
            )
        if self.is_read_only and self.is_destructive:
            raise ToolDefinitionError(
                f"tool {name!r} cannot be both read-only and destructive; pick one"
            )
        if self.policy is None:
            policy: Policy = "require_approval" if self.is_destructive else "auto"
            object.__setattr__(self, "policy", policy)
        elif not callable(self.policy) and not isinstance(self.policy, str):
            try:
                decision_from(self.policy)
            except PolicyError as error:
                raise ToolDefinitionError(
                    f"tool {name!r}: policy declaration is invalid: {error}"
                ) from error
        elif not callable(self.policy) and self.policy not in _POLICIES:
            raise ToolDefinitionError(
                f"tool {name!r}: policy {self.policy!r} must be one of "
                f"{sorted(_POLICIES)}, a declaration, or a callable(params[, context])"
            )
        if isinstance(self.timeout, bool) or not (
            isinstance(self.timeout, int | float) and self.timeout > 0
        ):
            raise ToolDefinitionError(
                f"tool {name!r}: timeout must be a positive number of seconds, "
                f"got {self.timeout!r}"
            )
        if isinstance(self.max_result_bytes, bool) or not (
            isinstance(self.max_result_bytes, int) and self.max_result_bytes >= 256
        ):
            raise ToolDefinitionError(
                f"tool {name!r}: max_result_bytes must be an integer >= 256, "
                f"got {self.max_result_bytes!r}"
            )
        if self.permission is not None and (
            not isinstance(self.permission, str) or "." not in self.permission
        ):
            raise ToolDefinitionError(
                f"tool {name!r}: permission {self.permission!r} must be a Django "
                "permission string such as 'demo.add_refund'"
            )
        schema = self.parameters
        if not isinstance(schema, dict):
            raise ToolDefinitionError(
                f"tool {name!r}: parameters must be a pydantic model class or a JSON "
                f"Schema dict, got {type(schema).__name__}"
            )
        if schema.get("type") != "object":
            raise ToolDefinitionError(
                f"tool {name!r}: the parameter schema's root must be "
                f'{{"type": "object", ...}}, got type {schema.get("type")!r}; wrap the '
                "value in an object property (RT-04)"
            )
        # Imported on the first tool definition, not with the package (B6).
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            where = "/".join(str(p) for p in error.path) or "(root)"
            raise ToolDefinitionError(
                f"tool {name!r}: the parameter schema is not valid JSON Schema "
                f"2020-12 at {where}: {error.message}"
            ) from error
        object.__setattr__(self, "validator", Draft202012Validator(schema))

    def spec(self) -> ToolSpec:
        """Return the model-facing definition; ``parameters`` is the schema as given. Implements RT-01."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )

    def agui_tool(self) -> ag_ui.core.Tool:
        """Return the AG-UI ``Tool`` advertised in ``RunAgentInput.tools`` (FT-01)."""
        # Deferred: building the protocol's models is most of ag_ui's import cost,
        # which processes that only check a tool's policy (admin, governance) skip.
        import ag_ui.core

        return ag_ui.core.Tool(
            name=self.name, description=self.description, parameters=self.parameters
        )

    def policy_for(
        self, params: dict[str, Any], context: PolicyContext | None = None
    ) -> Policy:
        """Return the approval action (``auto | require_approval | deny``) for validated ``params``.

        A callable policy that raises or returns something else fails closed to
        ``require_approval`` (a person decides), and the problem is logged.
        Implements LP-01.
        """
        return self.policy_decide(params, context).action

    def policy_decide(
        self, params: dict[str, Any], context: PolicyContext | None = None
    ) -> PolicyDecision:
        """Return the full :class:`agentcore.policy.PolicyDecision` for validated ``params``.

        ``context`` (requesting user, thread, agent, tool properties) is passed to
        a policy callable of two parameters. Fails closed like :meth:`policy_for`.
        Implements LP-01.
        """
        return policy_evaluate(self.policy, params, context, tool_name=self.name)

    def properties(self) -> dict[str, Any]:
        """Return the tool's declared properties a policy context carries."""
        return {
            "name": self.name,
            "is_destructive": self.is_destructive,
            "is_read_only": self.is_read_only,
            "idempotent": self.idempotent,
            "permission": self.permission,
            "runs_on": self.runs_on,
        }

    def describe_activity(self, params: dict[str, Any]) -> str:
        """Return a short progress label such as ``"Checking the weather in Oslo"``. Implements RT-01."""
        fallback = f"Running {self.name}"
        label = self.activity
        if label is None:
            return fallback
        if callable(label):
            return label(params)
        return _format_label(label, params, fallback)

    def describe_review(self, params: dict[str, Any]) -> CallReview | None:
        """Return how a call with ``params`` reads to its approver, or ``None``.

        The tool's ``review(params)`` when it declares one (its summary, facts and
        pre-decision warnings); ``None`` when it does not, or when the review
        fails (logged): a review only informs, never blocks a decision. Implements RT-01.
        """
        if self.review is None:
            return None
        try:
            return self.review(params)
        except Exception:
            logger.warning("review of %s failed", self.name, exc_info=True)
            return None

    def describe_completed_activity(
        self, params: dict[str, Any], result: ToolOutput
    ) -> str:
        """Return the label that replaces the progress label once ``result`` is in. Implements RT-01."""
        fallback = f"Ran {self.name}"
        label = self.completed_activity
        if label is None:
            return fallback
        if callable(label):
            return label(params, result)
        values = dict(params)
        values.setdefault(
            "content", result.content if isinstance(result.content, str) else ""
        )
        return _format_label(label, values, fallback)


def _schema_from(
    name: str, parameters: type[BaseModel] | dict[str, Any] | None
) -> tuple[dict[str, Any], type[BaseModel] | None]:
    """Return ``(schema, model)`` for a pydantic model class, a passthrough dict or ``None``."""
    if parameters is None:
        return copy.deepcopy(_EMPTY_OBJECT_SCHEMA), None
    # A model class exists only once pydantic is imported: no import here.
    pydantic = sys.modules.get("pydantic")
    if (
        pydantic is not None
        and isinstance(parameters, type)
        and issubclass(parameters, pydantic.BaseModel)
    ):
        return parameters.model_json_schema(), parameters
    if isinstance(parameters, dict):
        return copy.deepcopy(parameters), None
    raise ToolDefinitionError(
        f"tool {name!r}: parameters must be a pydantic model class or a JSON Schema "
        f"dict, got {type(parameters).__name__}"
    )


def define_tool(
    *,
    name: str,
    description: str,
    parameters: type[BaseModel] | dict[str, Any] | None,
    execute: ExecuteFn,
    **options: Any,
) -> Tool:
    """Build a :class:`Tool`; ``options`` are the other :class:`Tool` fields.

    ``parameters`` is a pydantic model class (converted with ``model_json_schema``),
    a JSON Schema dict passed through unchanged (a copy, so later edits of the
    caller's dict do not leak in), or ``None`` for a parameterless tool.
    Raises :class:`ToolDefinitionError`. Implements RT-01, RT-04.
    """
    schema, model = _schema_from(name, parameters)
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise ToolDefinitionError(
            f"tool {name!r}: unknown option(s) {sorted(unknown)}; allowed: "
            f"{sorted(_OPTION_NAMES)}"
        )
    return Tool(
        name=name,
        description=description,
        parameters=schema,
        execute=execute,
        params_model=model,
        **options,
    )


_OPTION_NAMES: Final = frozenset(
    {
        "strict",
        "namespace",
        "namespace_description",
        "defer_loading",
        "execution_mode",
        "is_read_only",
        "is_destructive",
        "runs_on",
        "policy",
        "timeout",
        "max_result_bytes",
        "idempotent",
        "permission",
        "activity",
        "completed_activity",
        "review",
    }
)


def tool(**options: Any) -> Callable[[ExecuteFn], Tool]:
    """Return a decorator turning ``execute(params, context)`` into a :class:`Tool`.

    ``name`` defaults to the function's name and ``description`` to its docstring;
    ``parameters`` defaults to a parameterless object schema. The decorator only
    returns the tool; nothing is registered anywhere (RT-03).
    Raises :class:`ToolDefinitionError`. Implements RT-01.
    """

    def decorate(fn: ExecuteFn) -> Tool:
        opts = dict(options)
        name = opts.pop("name", getattr(fn, "__name__", ""))
        description = opts.pop("description", None)
        if description is None:
            import inspect

            description = inspect.getdoc(fn) or ""
        parameters = opts.pop("parameters", None)
        return define_tool(
            name=name,
            description=description,
            parameters=parameters,
            execute=fn,
            **opts,
        )

    return decorate


class Toolset:
    """The ordered tools one turn may use; a tool is available iff it is in the list.

    Deferred tools (``defer_loading=True``) are hidden from the model behind a
    generated ``search_tools`` tool until selected. Raises
    :class:`ToolDefinitionError` on a duplicate name. Implements RT-03.
    """

    __slots__ = ("_by_name", "_search", "_tools")

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        """Hold ``tools`` in order. Raises :class:`ToolDefinitionError` on duplicates."""
        ordered: list[Tool] = []
        by_name: dict[str, Tool] = {}
        for item in tools:
            if not isinstance(item, Tool):
                raise ToolDefinitionError(
                    f"toolset entry {item!r} is not a Tool; build it with define_tool()"
                )
            if item.name in by_name:
                raise ToolDefinitionError(
                    f"tool name {item.name!r} is declared twice in this turn; rename one "
                    "or drop it from one of the sources"
                )
            ordered.append(item)
            by_name[item.name] = item
        self._tools: tuple[Tool, ...] = tuple(ordered)
        self._search: Tool | None = None
        if any(t.defer_loading for t in ordered):
            if SEARCH_TOOLS_NAME in by_name:
                raise ToolDefinitionError(
                    f"tool name {SEARCH_TOOLS_NAME!r} is reserved when deferred tools "
                    "exist; rename the tool"
                )
            self._search = _make_search_tool(
                tuple(t for t in ordered if t.defer_loading)
            )
            by_name[SEARCH_TOOLS_NAME] = self._search
        self._by_name = by_name

    @classmethod
    def assemble(cls, *sources: Iterable[Tool]) -> Toolset:
        """Concatenate ``sources`` in order into one turn's toolset. Raises :class:`ToolDefinitionError` on duplicates. Implements RT-03."""
        return cls(t for source in sources for t in source)

    @property
    def names(self) -> list[str]:
        """Return the declared names in order (plus ``search_tools`` when generated)."""
        names = [t.name for t in self._tools]
        if self._search is not None:
            names.append(SEARCH_TOOLS_NAME)
        return names

    def __iter__(self) -> Iterator[Tool]:
        """Iterate over the declared tools in order."""
        return iter(self._tools)

    def __len__(self) -> int:
        """Return the number of declared tools."""
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        """Return whether ``name`` is exactly a tool of this turn."""
        return name in self._by_name

    def __repr__(self) -> str:
        """Return ``Toolset([...names...])``."""
        return f"Toolset({self.names!r})"

    def get(self, name: str) -> Tool | None:
        """Return the tool named exactly ``name``, or ``None``."""
        return self._by_name.get(name)

    def resolve(self, name: str) -> Tool | None:
        """Return the tool a model-given ``name`` means, or ``None`` when unknown.

        An exact name wins. Otherwise a provider-added prefix (``functions.x``,
        ``default_api:x``) is stripped only when what follows the last ``.`` or ``:``
        is exactly one declared name. Never raises. Implements SEC-04, SEC-05.
        """
        found = self._by_name.get(name)
        if found is not None:
            return found
        if not isinstance(name, str):
            return None
        cut = max(name.rfind("."), name.rfind(":"))
        if cut < 0:
            return None
        return self._by_name.get(name[cut + 1 :])

    def offered(self, selected_deferred: Iterable[str] = frozenset()) -> list[Tool]:
        """Return what the model sees this turn, in order.

        Non-deferred tools, the deferred tools named in ``selected_deferred``, and
        ``search_tools`` (last) when deferred tools exist. Implements RT-01, RT-03.
        """
        selected = set(selected_deferred)
        tools = [t for t in self._tools if not t.defer_loading or t.name in selected]
        if self._search is not None:
            tools.append(self._search)
        return tools

    def unknown_tool_message(self, name: str) -> str:
        """Return the actionable message for a call naming no tool here. Implements RT-09, SEC-05."""
        available = ", ".join(self.names) or "(none)"
        return f"no tool named {name!r}; available tools: {available}"


def selected_tools(details: Mapping[str, Any] | None) -> list[str]:
    """Return the tool names a ``search_tools`` result selected (from its ``details``)."""
    if not details:
        return []
    names = details.get("selected_tools", [])
    return [n for n in names if isinstance(n, str)]


def _make_search_tool(deferred: tuple[Tool, ...]) -> Tool:
    """Build the ``search_tools`` tool over ``deferred`` tools. Implements RT-01 ``deferLoading``."""

    def search(params: dict[str, Any], context: ToolContext) -> ToolOutput:
        words = [w for w in re.split(r"\W+", params.get("query", "").lower()) if w]
        wanted = set(params.get("names") or ())
        hits: list[Tool] = []
        for candidate in deferred:
            text = " ".join(
                filter(
                    None,
                    (
                        candidate.name,
                        candidate.description,
                        candidate.namespace,
                        candidate.namespace_description,
                    ),
                )
            ).lower()
            if candidate.name in wanted or (words and any(w in text for w in words)):
                hits.append(candidate)
        if not hits:
            names = ", ".join(t.name for t in deferred)
            return ToolOutput(
                content=f"No tool matched. Searchable tools: {names}. "
                "Search again with other words or pass their names.",
                details={"selected_tools": []},
            )
        lines = [f"- {t.name}: {t.description}" for t in hits]
        return ToolOutput(
            content="These tools are now available:\n" + "\n".join(lines),
            details={"selected_tools": [t.name for t in hits]},
        )

    return define_tool(
        name=SEARCH_TOOLS_NAME,
        description=(
            "Find more tools. Describe the task in 'query' (or give exact 'names'); "
            "the matching tools become callable on your next step."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you need a tool for."},
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Exact tool names to load.",
                },
            },
            "additionalProperties": False,
        },
        execute=search,
        is_read_only=True,
        execution_mode="parallel",
        policy="auto",
        timeout=5.0,
    )
