"""The exceptions the client raises: one per way a call does not go ahead."""

from __future__ import annotations

from typing import Any


class CountersignError(Exception):
    """Base of every client error; ``status`` is the HTTP status (0: no response)."""

    def __init__(
        self, message: str, *, status: int = 0, body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = body or {}

    @property
    def fields(self) -> dict[str, list[str]]:
        """The request fields Countersign named as wrong, with what it said of each."""
        fields = self.body.get("fields") or {}
        return {str(k): [str(m) for m in v] for k, v in fields.items()}


class NotAuthorized(CountersignError):
    """The token is missing or invalid (401), or may not do this (403)."""


class InvalidRequest(CountersignError):
    """Countersign refused the request (400/422); :attr:`fields` names what to fix."""


class Conflict(CountersignError):
    """The call is not in a state for this (409): claimed by ``holder``, or already reported."""

    @property
    def holder(self) -> str | None:
        """The claimant holding the call, when another one does."""
        detail = str(self.body.get("detail", ""))
        marker = "claimed by '"
        if marker in detail:
            return detail.split(marker, 1)[1].split("'", 1)[0]
        return None


class NotFound(CountersignError):
    """No such call, or not one this token may see (404)."""


class Rejected(CountersignError):
    """A person (or the policy) said no; ``reason`` says why. Do not run the call."""

    def __init__(
        self, message: str, *, reason: str = "", status_name: str = ""
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.status_name = status_name


class Responded(Rejected):
    """A person answered the call with text instead of running it. Do not run the call.

    ``response`` is their text: give it to the model as the call's result. A
    :class:`Rejected`, so code that stops on a refusal stops here too; its
    ``reason`` is the same text, so an adapter's refusal message carries it.
    """

    def __init__(self, message: str, *, response: str) -> None:
        super().__init__(message, reason=response, status_name="responded")
        self.response = response


class Expired(CountersignError):
    """Nobody decided in time; the request expired. Do not run the call."""


class OutcomeUnknown(CountersignError):
    """The claim lapsed before an outcome was reported; an operator resolves the call."""
