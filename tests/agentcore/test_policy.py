"""Policy decisions with context: forms, validation, failing closed."""

from __future__ import annotations

import logging

import pytest

from agentcore.policy import (
    EscalationStep,
    PolicyContext,
    PolicyDecision,
    PolicyError,
    decision_from,
    policy_evaluate,
)
from agentcore.tools import ToolDefinitionError, define_tool

CONTEXT = PolicyContext(
    user="olivia", thread_id="t-1", agent="demo", tool={"name": "pay"}
)


def _noop(params, context):
    return "ok"


def test_old_forms_keep_their_meaning():
    """A string, or a callable of the params, gives one approval anyone may give."""
    assert decision_from("auto") == PolicyDecision(
        action="auto", requester_may_approve=True
    )
    by_amount = define_tool(
        name="pay",
        description="Pay.",
        parameters={"type": "object", "properties": {"amount": {"type": "number"}}},
        execute=_noop,
        policy=lambda params: "auto" if params["amount"] < 10 else "require_approval",
    )
    assert by_amount.policy_for({"amount": 5}) == "auto"
    assert by_amount.policy_for({"amount": 50}) == "require_approval"


def test_a_context_policy_sees_user_thread_agent_and_tool():
    """A (params, context) callable returns a full decision; its fields are checked."""
    seen = []

    def policy(params, context):
        seen.append(
            (context.user, context.thread_id, context.agent, context.tool["name"])
        )
        return {
            "groups": ["finance"],
            "approvals_required": 2,
            "escalation": [{"groups": ["leads"], "after_seconds": 60}],
            "expiry_seconds": 600,
            "risk_level": "high",
            "risk_reason": "large",
        }

    decision = policy_evaluate(policy, {"amount": 5}, CONTEXT, tool_name="pay")
    assert seen == [("olivia", "t-1", "demo", "pay")]
    assert decision == PolicyDecision(
        action="require_approval",
        groups=("finance",),
        approvals_required=2,
        escalation=(EscalationStep(groups=("leads",), after_seconds=60.0),),
        expiry_seconds=600,
        risk_level="high",
        risk_reason="large",
    )
    assert decision.requester_may_approve is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"approvals_required": 0}, "approvals_required must be an integer >= 1"),
        ({"colour": "red"}, "unknown key(s) ['colour']"),
        ({"groups": "finance"}, "groups must be a list of group names"),
        ({"risk_level": "extreme"}, "risk_level 'extreme' must be one of"),
        (
            {
                "escalation": [{"groups": ["a"], "after_seconds": 60}],
                "expiry_seconds": 30,
            },
            "must be longer than the escalation steps",
        ),
        ("maybe", "action 'maybe' must be one of"),
        (42, "a policy must give"),
    ],
)
def test_nonsense_declarations_are_refused_with_the_reason(value, message):
    with pytest.raises(PolicyError) as refused:
        decision_from(value)
    assert message in str(refused.value)


def test_a_policy_that_raises_or_returns_nonsense_fails_closed_and_is_logged(caplog):
    def broken(params, context):
        raise RuntimeError("risk service down")

    with caplog.at_level(logging.ERROR, logger="agentcore.policy"):
        raised = policy_evaluate(broken, {}, CONTEXT, tool_name="pay")
        nonsense = policy_evaluate(
            lambda p: {"approvals_required": -1}, {}, None, tool_name="pay"
        )
    for decision in (raised, nonsense):
        assert (decision.action, decision.source, decision.risk_level) == (
            "require_approval",
            "fail_closed",
            "high",
        )
        assert decision.requester_may_approve is False
    assert "RuntimeError" in raised.risk_reason
    assert caplog.text.count("policy of tool 'pay' failed") == 2


def test_a_static_declaration_on_a_tool_is_checked_when_the_tool_is_defined():
    with pytest.raises(ToolDefinitionError, match="policy declaration is invalid"):
        define_tool(
            name="pay",
            description="Pay.",
            parameters=None,
            execute=_noop,
            policy={"approvals_required": "two"},
        )
    tool = define_tool(
        name="pay",
        description="Pay.",
        parameters=None,
        execute=_noop,
        policy={"groups": ["finance"], "approvals_required": 2},
    )
    assert tool.policy_decide({}).approvals_required == 2
