"""Fixtures for the janitor's tests: the approval workflow's (a refund awaiting approval)."""

from tests.approvals.conftest import approver, pending_refund

__all__ = ["approver", "pending_refund"]
