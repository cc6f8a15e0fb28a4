"""The tool and agent catalogue over the REST API (DC-05, RT-01)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agentcore.tools import define_tool
from demo.tools import DEMO_TOOLS

pytestmark = pytest.mark.django_db


def _transfer(params, context):
    return "ok"


#: A toolset whose policy depends on the arguments (shown as "conditional").
CONDITIONAL_TOOLS = (
    define_tool(
        name="transfer_funds",
        description="Move money between accounts.",
        parameters={
            "type": "object",
            "properties": {"amount": {"type": "number"}},
            "required": ["amount"],
        },
        execute=_transfer,
        runs_on="application",
        policy=lambda params: "auto" if params["amount"] < 10 else "require_approval",
    ),
)


def test_dc05_tools_list_every_demo_tool_with_schema_and_policy(api):
    """tools/?agent=demo lists the demo tools in offer order with their contract."""
    response = api.get("/api/tools/?agent=demo")

    assert response.status_code == 200
    tools = response.json()["results"]
    assert [t["name"] for t in tools] == [t.name for t in DEMO_TOOLS]
    refund = next(t for t in tools if t["name"] == "refund_order")
    source = next(t for t in DEMO_TOOLS if t.name == "refund_order")
    assert refund == {
        "agent": "demo",
        "name": "refund_order",
        "description": source.description,
        "parameters": source.parameters,
        "runsOn": "application",
        "policy": "require_approval",
        "isDestructive": True,
        "isReadOnly": False,
        "idempotent": True,
        "timeout": 10.0,
        "permission": "demo.add_refund",
    }
    weather = next(t for t in tools if t["name"] == "get_weather")
    assert (weather["runsOn"], weather["isReadOnly"], weather["policy"]) == (
        "agent",
        True,
        "auto",
    )


def test_a_callable_policy_is_shown_as_conditional(api, settings):
    """A policy decided per call by a function is listed as "conditional"."""
    settings.COUNTERSIGN_AGENTS = {
        **settings.COUNTERSIGN_AGENTS,
        "bank": {
            "provider": "scripted",
            "toolsets": ["tests.api.test_catalogue.CONDITIONAL_TOOLS"],
        },
    }

    every = api.get("/api/tools/").json()["results"]
    bank = api.get("/api/tools/?agent=bank").json()["results"]

    assert [(t["agent"], t["name"]) for t in bank] == [("bank", "transfer_funds")]
    assert bank[0]["policy"] == "conditional"
    assert [t["agent"] for t in every] == ["bank"] + ["demo"] * len(DEMO_TOOLS)


def test_tools_of_an_unknown_agent_answer_404(api):
    """An agent that is not configured is a 404 naming the configured ones."""
    response = api.get("/api/tools/?agent=nope")

    assert response.status_code == 404
    assert response.json() == {
        "type": "unknown_agent",
        "detail": "agent 'nope' is not configured; configured agents: ['demo']",
    }


def test_dc05_agents_list_names_provider_model_and_tools_but_no_secrets(api, settings):
    """agents/ shows each agent's provider, model and tools; never URLs or headers."""
    settings.COUNTERSIGN_AGENTS = {
        **settings.COUNTERSIGN_AGENTS,
        "remote": {
            "provider": "agui_http",
            "url": "http://127.0.0.1:9/agent",
            "headers": {"Authorization": "Bearer secret"},
            "toolsets": [],
        },
    }

    response = api.get("/api/agents/")

    assert response.status_code == 200
    assert response.json() == {
        "results": [
            {
                "name": "demo",
                "provider": "scripted",
                "model": "scripted",
                "tools": [t.name for t in DEMO_TOOLS],
            },
            {"name": "remote", "provider": "agui_http", "model": "", "tools": []},
        ]
    }
    assert "secret" not in response.content.decode()


def test_catalogue_needs_credentials():
    """Without credentials: 401."""
    assert APIClient().get("/api/tools/").status_code == 401
    assert APIClient().get("/api/agents/").status_code == 401
