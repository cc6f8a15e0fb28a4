"""The risk every surface shows is proportionate to the call. Implements LP-01."""

from __future__ import annotations

import pytest

from approvals.selectors import approval_risk
from tests.helpers.ui import make_user, pending_request

pytestmark = pytest.mark.django_db


def test_lp01_destructive_refund_risk_follows_its_threshold(settings):
    """0.99 and 100 are medium (destructive, within 100), 150.00 high; without a
    declared threshold (an MCP or remote tool's case) a destructive call is high."""
    owner = make_user("olivia")
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "RISK_THRESHOLDS": {"refund_order": {"amount": 100}},
    }
    small = approval_risk(pending_request(owner, call_id="c-small", amount=0.99))
    edge = approval_risk(pending_request(owner, call_id="c-edge", amount=100.0))
    big = approval_risk(pending_request(owner, call_id="c-big", amount=150.0))
    assert small == {
        "level": "medium",
        "reasons": [
            "destructive: the tool declares that it changes or deletes data, "
            "but amount 0.99 is within the policy threshold 100"
        ],
    }
    assert edge["level"] == "medium"
    assert big == {
        "level": "high",
        "reasons": [
            "destructive: the tool declares that it changes or deletes data",
            "amount 150 is over the policy threshold 100",
        ],
    }

    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "RISK_THRESHOLDS": {}}
    ungraded = approval_risk(pending_request(owner, call_id="c-none", amount=0.99))
    assert ungraded["level"] == "high"


def test_lp01_a_policy_still_raises_a_graded_call(settings):
    """A declared policy level is never talked down by the threshold."""
    owner = make_user("olivia")
    approval = pending_request(owner, call_id="c-policy", amount=1.0)
    approval.risk_level = "critical"
    approval.risk_reason = "finance review"
    assert approval_risk(approval)["level"] == "critical"
    assert approval_risk(approval)["reasons"][-1] == "policy: finance review"
