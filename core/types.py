"""Types shared by every package.

:data:`User` is the type of every user parameter of a service or selector, and
:data:`AnyUser` of a request's user, who may be anonymous. Countersign uses
Django's own ``auth.User`` (``AUTH_USER_MODEL`` is not swapped): its groups and
permissions are what approval routing and authorization read.
"""

from __future__ import annotations

from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User

__all__ = ["AnyUser", "User"]

#: A request's user: logged in or anonymous.
AnyUser: TypeAlias = User | AnonymousUser
