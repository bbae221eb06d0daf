"""Codex CLI rollouts from realdata/codex_cli imported as linear sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.formats import codex
from threadline.model.entries import CompactionEntry, CustomEntry

FILES = sorted((REALDATA / "codex_cli").glob("*.jsonl"))


def lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return [
        (n, json.loads(raw))
        for n, raw in enumerate(path.read_bytes().split(b"\n"), 1)
        if raw.strip()
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_line_is_an_entry_in_one_chain(path: Path) -> None:
    (s,) = importing.import_path(tl.open_store("memory://"), "codex", path)
    src = lines(path)
    meta = next(o["payload"] for _, o in src if o["type"] == "session_meta")
    assert s.id == meta["id"]
    for n, obj in src:
        e = s.entry(f"L{n}")
        if obj["type"] not in ("response_item", "compacted"):
            assert isinstance(e, CustomEntry)
            assert e.custom.data == obj["payload"]
    roots = [e for e in s.entries() if e.parent_id is None]
    assert [r.id for r in roots] == [f"L{src[0][0]}"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_context_starts_at_the_latest_compaction(path: Path) -> None:
    (s,) = importing.import_path(tl.open_store("memory://"), "codex", path)
    src = lines(path)
    c, comp = [(n, o) for n, o in src if o["type"] == "compacted"][-1]
    entry = s.entry(f"L{c}")
    assert isinstance(entry, CompactionEntry)
    replaced = comp["payload"]["replacement_history"]
    later = [n for n, o in src if o["type"] == "response_item" and n > c]
    want = [f"L{c}"] + [f"L{c}.{k}" for k in range(1, len(replaced) + 1)] + [f"L{n}" for n in later]
    ctx = s.context()
    assert ctx.view.ids() == want
    assert ctx.messages[0].text == comp["payload"]["message"]
    models = [
        o["payload"]["model"]
        for n, o in src
        if o["type"] == "turn_context" and "model" in o["payload"]
    ]
    assert ctx.model is not None and ctx.model.model_id == models[-1]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_function_and_custom_tool_calls_keep_their_ids(path: Path) -> None:
    (s,) = importing.import_path(tl.open_store("memory://"), "codex", path)
    for n, obj in lines(path):
        item = obj.get("payload") or {}
        if obj["type"] != "response_item":
            continue
        msg = s.entry(f"L{n}").payload
        if item.get("type") in ("function_call", "custom_tool_call"):
            assert [u.id for u in msg.tool_uses] == [item["call_id"]]
            assert msg.tool_uses[0].name == item["name"]
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            assert [r.tool_use_id for r in msg.tool_results] == [item["call_id"]]


def test_a_claude_code_file_is_not_a_rollout() -> None:
    path = REALDATA / "claude_code" / "jnarowski_agentcmd__user-image.jsonl"
    with pytest.raises(tl.UserError, match=r"user-image\.jsonl: line 1: not a Codex rollout"):
        codex.import_session(tl.open_store("memory://"), path)
