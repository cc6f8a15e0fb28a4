"""Look up a provider adapter by name, importing its module (and SDK) only then.

Also the ``ALLOW_MODEL_REQUESTS`` switch tests turn off so no adapter reaches a real model
(STYLE 16): with it off, only loopback base URLs are allowed. The
error mapping (SEC-06) lives in :mod:`agentcore.providers.errors`; its two oldest
functions are re-exported here for earlier callers.
"""

from __future__ import annotations

import importlib
import inspect
import ipaddress
import os
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, overload
from urllib.parse import urlsplit

from agentcore.providers.base import Provider, ProviderError
from agentcore.providers.errors import error_for_status, error_from_sdk

if TYPE_CHECKING:
    from agentcore.agents import Agent

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "PROVIDERS",
    "ProviderConfigError",
    "check_model_request_allowed",
    "error_for_status",
    "error_from_sdk",
    "get_provider",
    "provider_options",
]

#: Constructor parameters set by the registry or the caller, never by configuration.
_NOT_OPTIONS: Final = frozenset(
    {"self", "model", "api_key", "base_url", "url", "turns", "transport"}
)

#: When ``False``, adapters refuse any base URL that is not a loopback address.
ALLOW_MODEL_REQUESTS: bool = True


class ProviderConfigError(ValueError):
    """A provider cannot be built: unknown name or a missing environment variable."""


@dataclass(frozen=True, slots=True)
class _Entry:
    module: str
    cls: str
    key_env: str | None = None
    url_env: str | None = None


PROVIDERS: Final[dict[str, _Entry]] = {
    "openai_chat": _Entry(
        "agentcore.providers.openai_chat",
        "OpenAIChatProvider",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ),
    "openai_responses": _Entry(
        "agentcore.providers.openai_responses",
        "OpenAIResponsesProvider",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ),
    "anthropic": _Entry(
        "agentcore.providers.anthropic",
        "AnthropicProvider",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    "gemini": _Entry(
        "agentcore.providers.gemini",
        "GeminiProvider",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
    "scripted": _Entry("agentcore.providers.scripted", "ScriptedProvider"),
    "agui_http": _Entry("agentcore.providers.agui_http", "RemoteAgent"),
}


@overload
def get_provider(
    name: Literal["agui_http"],
    *,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Agent: ...


@overload
def get_provider(
    name: str,
    *,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Provider: ...


def get_provider(
    name: str,
    *,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Provider | Agent:
    """Build the adapter ``name`` for ``model``, importing its module lazily.

    Network adapters get ``api_key`` and ``base_url`` from the arguments or else from
    ``<VENDOR>_API_KEY`` / ``<VENDOR>_BASE_URL`` (the base URL may stay ``None``: the
    SDK's default). ``scripted`` is constructed with ``model=``, ``base_url=`` /
    ``api_key=`` (when given) and ``**options``. ``agui_http`` is a remote AG-UI
    agent, not a model provider: it returns ``RemoteAgent(base_url, **options)``
    (``model`` and ``api_key`` unused; pass credentials as ``headers=``). Raises
    :class:`ProviderConfigError` for an unknown name, a missing API key (naming the
    variable) or an ``agui_http`` without ``base_url``. Implements STYLE 15.
    """
    entry = PROVIDERS.get(name)
    if entry is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ProviderConfigError(f"unknown provider {name!r}; expected one of {known}")
    if name == "agui_http":
        if not base_url:
            raise ProviderConfigError(
                "provider 'agui_http' needs base_url (the agent URL)"
            )
        agent_cls = getattr(importlib.import_module(entry.module), entry.cls)
        agent: Agent = agent_cls(base_url, **options)
        return agent
    kwargs: dict[str, Any] = dict(options)
    if entry.key_env is not None:
        api_key = api_key or os.environ.get(entry.key_env) or None
        if api_key is None:
            raise ProviderConfigError(
                f"provider {name!r} needs an API key: set {entry.key_env}"
            )
        kwargs["api_key"] = api_key
        kwargs["base_url"] = (
            base_url
            or (os.environ.get(entry.url_env, "") if entry.url_env else "")
            or None
        )
    else:
        if base_url is not None:
            kwargs["base_url"] = base_url
        if api_key is not None:
            kwargs["api_key"] = api_key
    module = importlib.import_module(entry.module)
    cls = getattr(module, entry.cls)
    provider: Provider = cls(model=model, **kwargs)
    return provider


def provider_options(name: str) -> dict[str, Any]:
    """Return the options adapter ``name`` accepts, as ``{option: type annotation}``.

    These are its constructor's keyword parameters, less those the registry fills
    (``model``, ``api_key``, ``base_url``, ``url``) and objects no configuration
    can hold (``transport``, a script). Imports the adapter's module (and SDK).
    Raises :class:`ProviderConfigError` for an unknown name. Implements STYLE 15.
    """
    entry = PROVIDERS.get(name)
    if entry is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ProviderConfigError(f"unknown provider {name!r}; expected one of {known}")
    cls = getattr(importlib.import_module(entry.module), entry.cls)
    return callable_options(cls)


def callable_options(factory: Any) -> dict[str, Any]:
    """Return ``factory``'s configurable keyword parameters as ``{name: annotation}``.

    ``factory`` is a class (its ``__init__`` is read) or a function. A parameter
    without an annotation maps to :data:`typing.Any`; a ``**kwargs`` parameter
    adds the key ``"**"`` (anything is accepted). Raises nothing.
    """
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except (NameError, TypeError):
        hints = {}
    options: dict[str, Any] = {}
    for param in inspect.signature(target).parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            options["**"] = Any
        elif param.name not in _NOT_OPTIONS and param.kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            options[param.name] = hints.get(param.name, Any)
    return options


def check_model_request_allowed(base_url: str | None, *, provider: str) -> None:
    """Raise :class:`ProviderError` (``model_requests_disabled``) when requests are off.

    With :data:`ALLOW_MODEL_REQUESTS` ``False``, only ``base_url`` values whose host is
    a loopback address (``127.0.0.1``, ``::1``, ``localhost``) pass. Implements STYLE 16.
    """
    if ALLOW_MODEL_REQUESTS:
        return
    host = urlsplit(base_url or "").hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ProviderError(
        f"{provider}: model requests are disabled (ALLOW_MODEL_REQUESTS is False)",
        code="model_requests_disabled",
    )
