"""OpenAI Agents SDK RunState snapshots (realdata/openai_agents_sdk): the Responses-API items
they hold — each model response's output and each generated item's raw item — round-trip
through ``formats.openai_responses`` without loss. A RunState is a paused run (pending tool
approvals), not a transcript, so it is not imported as a session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import REALDATA
from threadline.formats import openai_responses
from threadline.model.content import ToolUseBlock

FILES = sorted((REALDATA / "openai_agents_sdk").glob("*.json"))


def test_both_run_state_files_are_present() -> None:
    assert [f.name for f in FILES] == [
        "openai_openai-agents-python__run_state__v1_13_pending_tool_approval.json",
        "openai_openai-agents-python__run_state__v1_13_programmatic_tool_calling.json",
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("__")[-1])
def test_every_responses_item_of_a_run_state_round_trips(path: Any) -> None:
    state = json.loads(path.read_text(encoding="utf-8"))
    batches = [resp["output"] for resp in state["model_responses"]]
    batches.append([item["raw_item"] for item in state["generated_items"]])
    for items in batches:
        # output batches end on calls still pending approval: the shaping alone round-trips them
        # (a request dump would answer them, docs/formats.md "Send policy")
        assert openai_responses.shape(openai_responses.load(items)) == items


def test_a_pending_function_call_loads_as_a_tool_use_with_its_arguments() -> None:
    state = json.loads(FILES[0].read_text(encoding="utf-8"))
    raws = [item["raw_item"] for item in state["generated_items"]]
    calls = [
        b.tool_use
        for m in openai_responses.load(raws)
        for b in m.content
        if isinstance(b, ToolUseBlock)
    ]
    assert [(c.id, c.name, c.input) for c in calls] == [
        (r["call_id"], r["name"], json.loads(r["arguments"])) for r in raws
    ]
