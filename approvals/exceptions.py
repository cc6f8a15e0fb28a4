"""Domain errors of the approval workflow, each with a stable ``code`` and HTTP status."""

from __future__ import annotations

from core.errors import CountersignError


class ApprovalError(CountersignError):
    """Base class of approval errors."""

    code = "approval_error"
    status = 400


class ApprovalPermissionDenied(ApprovalError):
    """The user lacks ``approvals.decide_approvalrequest``."""

    code = "permission_denied"
    status = 403


class ApprovalNotAuthorized(ApprovalPermissionDenied):
    """The user may decide but not authorize this call: they lack the tool's own permission.

    Raised before anything is recorded, so the request stays pending (SEC-02).
    ``authorization`` is the :class:`approvals.authorization.Authorization` checked.
    """

    code = "not_authorized"
    status = 403

    def __init__(self, message: str, *, authorization: object = None) -> None:
        super().__init__(message)
        self.authorization = authorization


class ApprovalAlreadyDecided(ApprovalError):
    """The request was already decided differently (or expired, or was cancelled)."""

    code = "already_decided"
    status = 409


class ApprovalClaimed(ApprovalError):
    """Another approver holds a live claim on the request; wait or ask them to release it."""

    code = "claimed"
    status = 409


class GrantRefused(ApprovalError):
    """A scoped grant that cannot be made (scope, constraint or the granter's rights)."""

    code = "invalid_grant"
    status = 400
    field = "grant"


class ApprovalExpired(ApprovalError):
    """The request expired before the decision arrived; it was answered as expired."""

    code = "expired"
    status = 409


class InvalidEditedArguments(ApprovalError):
    """Edited arguments do not validate against the tool's schema."""

    code = "invalid_arguments"
    status = 400


class InvalidResponse(ApprovalError):
    """An operator's response does not satisfy the request's ``responseSchema`` (IR-18)."""

    code = "invalid_response"
    status = 400
    field = "response"


class InvalidRespondText(ApprovalError):
    """An approver's answer to a call is empty, only whitespace, or too long."""

    code = "invalid_text"
    status = 400
    field = "text"


class RespondNotSupported(ApprovalError):
    """Only a held tool call can be answered with text; an interrupt or input request cannot."""

    code = "respond_not_supported"
    status = 400
    field = "text"


class InvalidSnooze(ApprovalError):
    """A snooze outside the accepted duration."""

    code = "invalid_snooze"
    status = 400
    field = "seconds"


class ReasonRequired(ApprovalError):
    """A rejection needs a reason."""

    code = "reason_required"
    status = 400


class ExecutionInProgress(ApprovalError):
    """Another delivery holds the call's execution lease; try again after ``retry_after`` s."""

    code = "execution_in_progress"
    status = 409

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ExecutionDeferred(ExecutionInProgress):
    """The call is approved but may not run before its ``not_before`` (the undo window)."""

    code = "execution_deferred"


class UndoTooLate(ApprovalError):
    """The decision can no longer be undone: execution started, or it was not undoable."""

    code = "undo_too_late"
    status = 409


class ResumeRefused(ApprovalError):
    """A ``RunAgentInput.resume`` that cannot be applied; nothing was decided (IR-07…IR-13).

    ``code`` names the case (``interrupts_uncovered``, ``duplicate_resume_entry``,
    ``invalid_resume_payload``, ``INTERRUPT_EXPIRED``, ``interrupt_decided``),
    ``field`` the input member at fault and ``extra`` more of the body (for
    ``interrupt_decided`` the recorded decisions).
    """

    status = 409

    def __init__(
        self,
        message: str,
        *,
        code: str,
        field: str = "resume",
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.extra = extra or {}


class ResumeInvalid(ResumeRefused):
    """A malformed resume (a repeated entry, a payload failing ``responseSchema``): 400."""

    status = 400


class ExternalCallInvalid(ApprovalError):
    """A declared call the approval API refuses before recording anything: 400.

    ``field`` names the request member at fault (``agent``, ``tool``,
    ``arguments``, ``inputSchema``...); the message says what to send instead.
    """

    code = "invalid_external_call"
    status = 400

    def __init__(self, message: str, *, field: str, code: str = "") -> None:
        super().__init__(message)
        self.field = field
        if code:
            self.code = code


class ExecutionClaimed(ExecutionInProgress):
    """Another claimant holds a live claim on the call's execution; ``holder`` names it."""

    code = "claimed_by_another"
    field = "holder"

    def __init__(self, message: str, *, retry_after: float, holder: str) -> None:
        super().__init__(message, retry_after=retry_after)
        self.holder = holder


class OutcomeRefused(ApprovalError):
    """An outcome report that cannot be recorded (no claim, another holder, a second body): 409."""

    code = "outcome_refused"
    status = 409

    def __init__(self, message: str, *, code: str, field: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class NotClaimable(ApprovalError):
    """The call may not be claimed: not approved (pending, refused, run already...): 409.

    ``call_status`` is its status in the approval API (docs/integrations.md).
    """

    code = "not_claimable"
    status = 409
    field = "status"

    def __init__(self, message: str, *, call_status: str) -> None:
        super().__init__(message)
        self.call_status = call_status
