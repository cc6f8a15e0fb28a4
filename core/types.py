"""Types shared by every package.

:data:`User` is the type of every user parameter of a service or selector, and
:data:`AnyUser` of a request's user, who may be anonymous; :func:`logged_in`
narrows the second to the first where authentication already turned anonymous
users away. Countersign uses Django's own ``auth.User`` (``AUTH_USER_MODEL`` is
not swapped): its groups and permissions are what approval routing and
authorization read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied

__all__ = ["AnyUser", "JSONValue", "User", "logged_in"]

#: A request's user: logged in or anonymous.
AnyUser: TypeAlias = User | AnonymousUser

#: A JSON value as a parameter takes it (audit before/after images, interrupt
#: responses, request bodies, tool arguments before validation). Read-only
#: containers, so a caller's ``list[str]`` or ``dict[str, int]`` is one too.
JSONValue: TypeAlias = (
    "bool | int | float | str | Sequence[JSONValue] | Mapping[str, JSONValue] | None"
)


def logged_in(user: AnyUser) -> User:
    """Return ``user`` as the logged-in :class:`User` a write service takes.

    For shells whose authentication already turned anonymous requests away (DRF's
    ``IsAuthenticated``, the admin site), so the refusal is unreachable there:
    raises :class:`django.core.exceptions.PermissionDenied` for an anonymous user.
    """
    if isinstance(user, AnonymousUser):
        raise PermissionDenied("authentication is required")
    return user
