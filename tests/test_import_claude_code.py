"""Claude Code transcripts from realdata/claude_code imported as session trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.formats import anthropic, claude_code
from threadline.model.content import ImageBlock, ThinkingBlock, ToolResultBlock
from threadline.model.entries import CompactionEntry, CustomEntry

CC = REALDATA / "claude_code"
FILES = sorted(CC.glob("*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]


def imported(path: Path) -> tl.Session:
    (s,) = importing.import_path(tl.open_store("memory://"), "claude_code", path)
    return s


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_record_is_kept_under_its_own_uuid(path: Path) -> None:
    s = imported(path)
    recs = records(path)
    ids = set(s.entry_ids())
    uuids = [r["uuid"] for r in recs if isinstance(r.get("uuid"), str)]
    first_seen = list(dict.fromkeys(uuids))
    assert set(first_seen) <= ids
    named = 1 if s.name else 0
    assert len(ids) == len(recs) + named
    convo = [r for r in recs if r["type"] in ("user", "assistant")]
    summaries = [
        e
        for e in s.entries()
        if isinstance(e, CustomEntry) and e.custom.custom_type == "claude_code:compact_summary"
    ]
    assert s.message_count() + len(summaries) == len(convo)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_tool_calls_in_the_context_all_have_their_results(path: Path) -> None:
    msgs = list(imported(path).context().messages)
    calls = [u.id for m in msgs for u in m.tool_uses]
    results = [r.tool_use_id for m in msgs for r in m.tool_results]
    assert sorted(calls) == sorted(results)
    assert len(set(calls)) == len(calls)


@pytest.mark.parametrize("name", ["marot_spotter__short.jsonl", "marot_spotter__tool_heavy.jsonl"])
def test_parallel_tool_calls_put_every_call_and_result_on_the_main_path(name: str) -> None:
    path = CC / name
    s = imported(path)
    main = [r["uuid"] for r in records(path) if r["type"] in ("user", "assistant")]
    assert s.context().view.ids() == main


def starts_with_a_prompt(path: Path) -> bool:
    """False for excerpts that begin mid-conversation (with an assistant record)."""
    return next(r["type"] for r in records(path) if r["type"] in ("user", "assistant")) == "user"


@pytest.mark.parametrize(
    "path", [p for p in FILES if starts_with_a_prompt(p)], ids=lambda p: p.name
)
def test_the_context_is_a_valid_anthropic_history(path: Path) -> None:
    anthropic.validate(anthropic.dump(list(imported(path).context().messages)))


def test_a_result_written_after_the_next_reply_is_put_before_it() -> None:
    path = CC / "marot_spotter__ae4a77f8__subagents__agent-aac57f5.jsonl"
    recs = records(path)
    s = imported(path)
    ids = s.context().view.ids()
    # every result comes after its call and before the next assistant turn that follows it
    calls = {
        b["id"]: r["uuid"]
        for r in recs
        if r["type"] == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    }
    for r in recs:
        content = r.get("message", {}).get("content")
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                assert ids.index(calls[b["tool_use_id"]]) < ids.index(r["uuid"])
    moved = [
        e
        for e in s.entries()
        if e.type == "message"
        and "parentUuid" in (e.payload.provider_details or {}).get("claude_code", {})
    ]
    for e in moved:
        original = next(r["parentUuid"] for r in recs if r.get("uuid") == e.id)
        assert e.payload.provider_details["claude_code"]["parentUuid"] == original


def test_multiple_roots_and_inline_sidechains_stay_apart() -> None:
    path = CC / "d-kimuson_claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
    recs = records(path)
    s = imported(path)
    roots = [r["uuid"] for r in recs if "uuid" in r and r.get("parentUuid") is None]
    assert len(roots) == 6
    for rid in roots:
        assert s.entry(rid).parent_id is None
    side = {r["uuid"] for r in recs if r.get("isSidechain")}
    assert len(side) == 405
    view = set(s.context().view.ids())
    assert view.isdisjoint(side)
    assert side <= set(s.entry_ids())
    # a sidechain is a subtree of its own: no sidechain entry hangs under a main entry
    for rid in side:
        parent = s.entry(rid).parent_id
        assert parent is None or parent in side
    last_main = [
        r["uuid"] for r in recs if r["type"] in ("user", "assistant") and not r.get("isSidechain")
    ][-1]
    assert s.leaf_id == last_main


def test_a_subagent_file_alone_keeps_its_own_conversation() -> None:
    path = CC / "marot_spotter__ae4a77f8__subagents__agent-aac57f5.jsonl"
    recs = records(path)
    s = imported(path)
    convo = [r["uuid"] for r in recs if r["type"] in ("user", "assistant")]
    assert s.leaf_id == convo[-1]
    assert sorted(s.context().view.ids()) == sorted(convo)


def test_compact_boundary_becomes_a_compaction_with_the_summary_text() -> None:
    path = CC / "marot_spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    recs = records(path)
    (boundary,) = [r for r in recs if r.get("subtype") == "compact_boundary"]
    (summary,) = [r for r in recs if r.get("isCompactSummary")]
    s = imported(path)
    comp = s.entry(boundary["uuid"])
    assert isinstance(comp, CompactionEntry)
    assert comp.parent_id == boundary["logicalParentUuid"]
    assert comp.compaction.summary == summary["message"]["content"]
    assert comp.compaction.tokens_before == boundary["compactMetadata"]["preTokens"]
    ctx = s.context()
    assert ctx.messages[0].role == "compactionSummary"
    assert ctx.messages[0].text == summary["message"]["content"]
    after = {r["uuid"] for r in recs[recs.index(boundary) :] if r["type"] in ("user", "assistant")}
    assert set(ctx.view.ids()[1:]) <= after


@pytest.mark.parametrize(
    "name",
    [
        "jnarowski_agentcmd__full-session-two.jsonl",
        "jnarowski_agentcmd__tool-result-image.jsonl",
        "jnarowski_agentcmd__user-image.jsonl",
    ],
)
def test_images_in_prompts_and_tool_results_are_kept(name: str) -> None:
    path = CC / name
    s = imported(path)
    found = 0
    for r in records(path):
        content = (r.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        want = []
        for b in content:
            inner = b.get("content") if b.get("type") == "tool_result" else [b]
            for p in inner if isinstance(inner, list) else []:
                if p.get("type") == "image":
                    want.append((p["source"]["media_type"], p["source"]["data"]))
        if not want:
            continue
        msg = s.entry(r["uuid"]).payload
        got = []
        for b in msg.content:
            parts = b.tool_result.content if isinstance(b, ToolResultBlock) else [b]
            for p in parts if isinstance(parts, list) else []:
                if isinstance(p, ImageBlock):
                    got.append((p.image.source.media_type, p.image.source.data))
        assert got == want
        found += len(want)
    assert found >= 1


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_thinking_blocks_keep_text_and_signature(path: Path) -> None:
    s = imported(path)
    first: dict[str, dict[str, Any]] = {}
    for r in records(path):
        if isinstance(r.get("uuid"), str):
            first.setdefault(r["uuid"], r)
    for uid, r in first.items():
        if r["type"] != "assistant":
            continue
        want = [
            (b["thinking"], b.get("signature"))
            for b in r["message"]["content"]
            if isinstance(b, dict) and b.get("type") == "thinking"
        ]
        got = [
            (b.thinking.content, b.thinking.signature)
            for b in s.entry(uid).payload.content
            if isinstance(b, ThinkingBlock)
        ]
        assert got == want


def test_a_custom_title_names_the_session() -> None:
    path = CC / "jazzyalex_agent-sessions__stage0_claude_small.jsonl"
    (title,) = [r["customTitle"] for r in records(path) if r["type"] == "custom-title"]
    assert imported(path).name == title


def test_a_pi_file_is_not_a_claude_code_transcript() -> None:
    path = REALDATA / "pi_session" / "marcus_sidecar__pi__tool-session.jsonl"
    with pytest.raises(tl.UserError, match=r"tool-session\.jsonl: line 1: not a Claude Code"):
        claude_code.import_session(tl.open_store("memory://"), path)
