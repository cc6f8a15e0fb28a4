"""URL conf entries whose view or consumer module is imported on first use.

A web process answers its first ``/healthz`` before it has imported DRF, the AG-UI
protocol models, the approval stack or the ``mcp`` SDK: ``config.urls`` names the
other views by dotted path (:func:`lazy_view`) and mounts URL confs by module name
(:func:`lazy_include`); ``web.routing`` names the consumers and the MCP gateway's
app the same way (:func:`lazy_asgi`). Each is imported when a request, a socket or
a ``reverse()`` first needs it.

Django reads two things off a resolved view before calling it: whether it is a
coroutine function (how the handler calls it) and its ``csrf_exempt`` attribute
(``CsrfViewMiddleware.process_view``). Both must hold before the view's module is
imported, so the entry declares them, and the first call checks the declaration
against the real view: a mismatch raises ``ImproperlyConfigured`` naming the view
and the flag to declare, instead of a view that silently loses its CSRF exemption
or runs on the wrong side of the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from importlib import import_module
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import URLResolver
from django.urls.resolvers import RoutePattern

__all__ = ["LazyView", "lazy_asgi", "lazy_include", "lazy_view"]

View = Callable[..., Any]


class LazyView:
    """A view named by dotted path, imported on its first call.

    ``target`` is ``"package.module.attribute"``: a view function, or a class-based
    view (anything with ``as_view``), which is built with ``initkwargs``.
    """

    def __init__(
        self,
        target: str,
        *,
        is_async: bool,
        csrf_exempt: bool,
        initkwargs: dict[str, Any],
    ) -> None:
        self.target = target
        self.is_async = is_async
        self.csrf_exempt = csrf_exempt
        self._initkwargs = initkwargs
        self._view: View | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LazyView {self.target}>"

    def resolve(self) -> View:
        """Import the view (once) and return it.

        Raises ``ImproperlyConfigured`` when the target cannot be imported or when
        the declared ``is_async`` / ``csrf_exempt`` differ from the real view's.
        """
        view = self._view
        if view is not None:
            return view
        with self._lock:
            if self._view is None:
                self._view = self._load()
            return self._view

    def _load(self) -> View:
        found = _import(self.target, "lazy_view")
        view: View = (
            found.as_view(**self._initkwargs) if hasattr(found, "as_view") else found
        )
        actual_async = iscoroutinefunction(view)
        if actual_async != self.is_async:
            raise ImproperlyConfigured(
                f"lazy_view({self.target!r}) declares is_async={self.is_async!r} "
                f"but the view is {'async' if actual_async else 'sync'}; "
                f"declare is_async={actual_async!r}"
            )
        actual_exempt = bool(getattr(view, "csrf_exempt", False))
        if actual_exempt != self.csrf_exempt:
            raise ImproperlyConfigured(
                f"lazy_view({self.target!r}) declares csrf_exempt={self.csrf_exempt!r}"
                f" but the view's is {actual_exempt!r}; declare "
                f"csrf_exempt={actual_exempt!r}"
            )
        return view


def lazy_view(
    target: str,
    *,
    is_async: bool = False,
    csrf_exempt: bool = False,
    **initkwargs: Any,
) -> View:
    """Return a view for a URL conf entry that imports ``target`` on its first call.

    ``target`` is a dotted path to a view function or a class-based view (built
    with ``initkwargs``). ``is_async`` and ``csrf_exempt`` must match the real
    view: Django reads them off the returned wrapper before the first call, and
    the first call raises ``ImproperlyConfigured`` when they do not match.
    """
    lazy = LazyView(
        target, is_async=is_async, csrf_exempt=csrf_exempt, initkwargs=initkwargs
    )
    view: View
    if is_async:

        async def async_view(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            response: HttpResponseBase = await lazy.resolve()(request, *args, **kwargs)
            return response

        view = markcoroutinefunction(async_view)
    else:

        def sync_view(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            response: HttpResponseBase = lazy.resolve()(request, *args, **kwargs)
            return response

        view = sync_view
    # Django reads these off the wrapper: the name for its resolver match, the
    # exemption for CsrfViewMiddleware. Plain function attributes, as
    # ``csrf_exempt`` itself sets them.
    marked: Any = view
    marked.__name__ = marked.__qualname__ = target.rpartition(".")[2]
    marked.__module__ = target.rpartition(".")[0]
    marked.lazy = lazy
    if csrf_exempt:
        marked.csrf_exempt = True
    return view


def lazy_include(route: str, urlconf: str) -> URLResolver:
    """Return a URL conf entry mounting the module ``urlconf`` at ``route``, imported lazily.

    ``include()`` imports its module at once; a resolver given the module's name
    imports it the first time a request or ``reverse()`` walks past ``route``. For
    URL confs without an ``app_name`` (no namespace).
    """
    return URLResolver(RoutePattern(route, is_endpoint=False), urlconf)


AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[Any]],
        Callable[[Any], Awaitable[None]],
    ],
    Awaitable[None],
]


def lazy_asgi(target: str) -> AsgiApp:
    """Return an ASGI app that imports ``target`` on its first connection.

    ``target`` is ``"package.module.attribute"``: a Channels consumer class (the
    app is its ``as_asgi()``, built once) or an ASGI app. An unknown target raises
    ``ImproperlyConfigured`` on the first connection.
    """
    built: list[AsgiApp] = []
    lock = threading.Lock()

    def resolve() -> AsgiApp:
        if not built:
            with lock:
                if not built:
                    found = _import(target, "lazy_asgi")
                    built.append(
                        found.as_asgi() if hasattr(found, "as_asgi") else found
                    )
        return built[0]

    async def app(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        await resolve()(scope, receive, send)

    app.__qualname__ = app.__name__ = target.rpartition(".")[2]
    return app


def _import(target: str, caller: str) -> Any:
    """Return the attribute ``target`` names (``"package.module.attribute"``).

    Raises ``ImproperlyConfigured`` naming ``caller`` and ``target`` when it does
    not exist.
    """
    module, _, attribute = target.rpartition(".")
    try:
        return getattr(import_module(module), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"{caller}({target!r}) names nothing importable: {exc}; "
            "name it as 'package.module.attribute'"
        ) from exc
