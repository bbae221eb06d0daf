"""pi sessions (v1 linear, v3 trees) imported from the real files in realdata/pi_session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.cli.main import cli
from threadline.formats import pi
from threadline.model.content import ThinkingBlock, ToolResultBlock, ToolUseBlock
from threadline.model.entries import CompactionEntry, CustomEntry

PI = REALDATA / "pi_session"
SESSIONS = sorted(PI.glob("*.jsonl"))


def source_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, entry or None when the line is not JSON), header excluded."""
    out = []
    for n, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError:
            out.append((n, None))
    return out[1:]


def reference_context(path: Path) -> list[str]:
    """Roles of pi's session context at the last entry, computed straight from the file the
    way pi documents it: walk parents from the last entry; the latest compaction on the path
    gives its summary, the kept entries before it and everything after it."""
    good = [(n, e) for n, e in source_lines(path) if e is not None]
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    linear = header.get("version", 1) < 2
    ids = [f"L{n}" if linear else e["id"] for n, e in good]
    by_id = {i: e for i, (_, e) in zip(ids, good, strict=True)}
    parent = {
        i: (ids[k - 1] if k else None) if linear else e.get("parentId")
        for k, (i, (_, e)) in enumerate(zip(ids, good, strict=True))
    }
    path_ids = []
    cur: str | None = ids[-1]
    while cur in by_id:
        path_ids.append(cur)
        cur = parent[cur]
    path_ids.reverse()
    comps = [k for k, i in enumerate(path_ids) if by_id[i]["type"] == "compaction"]

    def role(e: dict[str, Any]) -> str | None:
        if e["type"] == "message":
            return str(e["message"]["role"])
        if e["type"] == "custom_message":
            return "custom"
        if e["type"] == "branch_summary" and e.get("summary"):
            return "branchSummary"
        return None

    if not comps:
        chosen = path_ids
        roles: list[str] = []
    else:
        c = comps[-1]
        comp = by_id[path_ids[c]]
        first = comp.get("firstKeptEntryId")
        if "firstKeptEntryIndex" in comp:  # v1: index into [header, *entries]
            first = ids[comp["firstKeptEntryIndex"] - 1]
        before = path_ids[:c]
        kept = before[before.index(first) :] if first in before else []
        chosen = kept + path_ids[c + 1 :]
        roles = ["compactionSummary"]
    roles += [r for r in (role(by_id[i]) for i in chosen) if r is not None]
    return roles


ROLE = {"toolResult": "tool", "hookMessage": "custom"}


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_real_pi_session_context_matches_pi(path: Path) -> None:
    store = tl.open_store("memory://")
    (s,) = importing.import_path(store, "pi", path)
    got = [m.role for m in s.context().messages]
    assert got == [ROLE.get(r, r) for r in reference_context(path)]


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_every_line_of_a_pi_session_becomes_one_entry(path: Path, tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "s")
    (s,) = importing.import_path(store, "pi", path)
    lines = source_lines(path)
    assert len(s.entry_ids()) == len(lines)
    messages = [e["message"] for _, e in lines if e is not None and e["type"] == "message"]
    assert s.message_count() == len(messages)
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    if header.get("version", 1) >= 2:  # tree files keep their own ids and parents
        for _, e in lines:
            rec = s.entry(e["id"])
            assert rec.timestamp == e["timestamp"]
            want = e["parentId"] if e["parentId"] in s.entry_ids() else None
            assert rec.parent_id == want


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_tool_calls_results_and_thinking_survive(path: Path) -> None:
    store = tl.open_store("memory://")
    (s,) = importing.import_path(store, "pi", path)
    msgs = [e.payload for e in s.entries() if e.type == "message"]
    src = [e["message"] for _, e in source_lines(path) if e is not None and e["type"] == "message"]
    assert len(msgs) == len(src)
    for got, want in zip(msgs, src, strict=True):
        content = want.get("content")
        if want["role"] == "assistant":
            calls = [
                (b["id"], b["name"], b["arguments"]) for b in content if b["type"] == "toolCall"
            ]
            assert [
                (b.tool_use.id, b.tool_use.name, b.tool_use.input)
                for b in got.content
                if isinstance(b, ToolUseBlock)
            ] == calls
            thoughts = [
                (b["thinking"], b.get("thinkingSignature"))
                for b in content
                if b["type"] == "thinking"
            ]
            assert [
                (b.thinking.content, b.thinking.signature)
                for b in got.content
                if isinstance(b, ThinkingBlock)
            ] == thoughts
            assert got.stop_reason == want.get("stopReason")
        elif want["role"] == "toolResult":
            (block,) = got.content
            assert isinstance(block, ToolResultBlock)
            assert block.tool_result.tool_use_id == want["toolCallId"]
            assert block.tool_result.is_error == want.get("isError", False)
            assert got.provider_details["pi"]["toolName"] == want["toolName"]


def test_the_corrupt_line_is_reported_and_its_neighbours_kept(tmp_path: Path) -> None:
    path = PI / "badlogic_pi-mono__root-session.jsonl"
    store = tl.open_store(tmp_path / "s")
    (s,) = importing.import_path(store, "pi", path)
    report = importing.report_of(s)
    assert report is not None
    assert [n for n, _ in report.corrupt_lines] == [440]
    kept = s.entry("corrupt-line-440")
    assert isinstance(kept, CustomEntry)
    raw = path.read_bytes().split(b"\n")[439].decode()
    assert kept.custom.data["text"] == raw
    # the chain runs through it: line 439 -> corrupt line 440 -> line 441
    assert kept.parent_id == "L439"
    assert s.entry("L441").parent_id == "corrupt-line-440"


def test_v1_first_kept_entry_index_becomes_an_entry_id() -> None:
    path = PI / "badlogic_pi-mono__before-compaction.jsonl"
    lines = source_lines(path)
    store = tl.open_store("memory://")
    (s,) = importing.import_path(store, "pi", path)
    comps = [(n, e) for n, e in lines if e is not None and e["type"] == "compaction"]
    assert len(comps) == 2
    for n, e in comps:
        rec = s.entry(f"L{n}")
        assert isinstance(rec, CompactionEntry)
        target_line = lines[e["firstKeptEntryIndex"] - 1][0]
        assert rec.compaction.first_kept_entry_id == f"L{target_line}"
        assert rec.compaction.tokens_before == e["tokensBefore"]


def test_a_pi_message_object_loads_as_one_message() -> None:
    path = PI / "badlogic_pi-mono__assistant-message-with-thinking-code.json"
    src = json.loads(path.read_text())
    (msg,) = pi.load(path)
    assert msg.role == "assistant"
    want = [b.get("thinking") or b.get("text") for b in src["content"]]
    assert [
        b.thinking.content if isinstance(b, ThinkingBlock) else b.text.content for b in msg.content
    ] == want
    assert msg.usage is not None and msg.usage.output == src["usage"]["output"]


V3 = [
    {
        "type": "session",
        "version": 3,
        "id": "tree-demo",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p",
    },
    {
        "type": "model_change",
        "id": "a1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01Z",
        "provider": "anthropic",
        "modelId": "claude",
    },
    {
        "type": "message",
        "id": "u1",
        "parentId": "a1",
        "timestamp": "2026-01-01T00:00:02Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    },
    {
        "type": "message",
        "id": "r1",
        "parentId": "u1",
        "timestamp": "2026-01-01T00:00:03Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "first"}],
            "provider": "anthropic",
            "model": "claude",
            "stopReason": "stop",
        },
    },
    {
        "type": "message",
        "id": "r2",
        "parentId": "u1",
        "timestamp": "2026-01-01T00:00:04Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "second"}]},
    },
    {
        "type": "branch_summary",
        "id": "b1",
        "parentId": "r2",
        "timestamp": "2026-01-01T00:00:05Z",
        "fromId": "r1",
        "summary": "tried the first answer",
    },
    {
        "type": "label",
        "id": "l1",
        "parentId": "b1",
        "timestamp": "2026-01-01T00:00:06Z",
        "targetId": "r1",
        "label": "good",
    },
    {
        "type": "session_info",
        "id": "s1",
        "parentId": "l1",
        "timestamp": "2026-01-01T00:00:07Z",
        "name": "demo",
    },
    {
        "type": "custom",
        "id": "c1",
        "parentId": "s1",
        "timestamp": "2026-01-01T00:00:08Z",
        "customType": "plan",
        "data": {"step": 1},
    },
    {
        "type": "custom_message",
        "id": "cm",
        "parentId": "c1",
        "timestamp": "2026-01-01T00:00:09Z",
        "customType": "note",
        "content": "remember",
        "display": True,
    },
    {
        "type": "mystery",
        "id": "x1",
        "parentId": "cm",
        "timestamp": "2026-01-01T00:00:10Z",
        "payload": 7,
    },
]


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_a_v3_tree_keeps_branches_labels_names_and_unknown_entries() -> None:
    store = tl.open_store("memory://")
    s = pi.import_session(store, jsonl(V3))
    assert s.id == "tree-demo"
    assert [c.id for c in s.children("u1")] == ["r1", "r2"]
    assert s.get_label("r1") == "good"
    assert s.name == "demo"
    assert s.leaf_id == "x1"
    mystery = s.entry("x1")
    assert isinstance(mystery, CustomEntry)
    assert mystery.custom.custom_type == "pi:mystery"
    assert mystery.custom.data == {
        "type": "mystery",
        "timestamp": "2026-01-01T00:00:10Z",
        "payload": 7,
    }
    ctx = s.context()
    assert [(m.role, m.text) for m in ctx.messages] == [
        ("user", "hi"),
        ("assistant", "second"),
        ("branchSummary", "tried the first answer"),
        ("custom", "remember"),
    ]
    assert ctx.model is not None and ctx.model.model_id == "claude"


def test_a_file_that_is_not_a_pi_session_is_refused_with_file_and_line() -> None:
    store = tl.open_store("memory://")
    bad = REALDATA / "claude_code" / "jnarowski_agentcmd__user-image.jsonl"
    with pytest.raises(tl.UserError, match=r"user-image\.jsonl: line 1: not a pi session"):
        importing.import_path(store, "pi", bad)
    assert store.list() == []


def test_a_bad_record_late_in_the_file_imports_nothing(tmp_path: Path) -> None:
    rows = [
        *V3,
        {
            "type": "message",
            "id": "m9",
            "parentId": "x1",
            "timestamp": "t",
            "message": "not an object",
        },
    ]
    store = tl.open_store(tmp_path / "s")
    with pytest.raises(tl.UserError, match=r"<data>: line 12: a pi \"message\" entry needs"):
        pi.import_session(store, jsonl(rows))
    assert store.list() == []
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == []


def test_cli_import_prints_one_line_per_session_and_the_report(tmp_path: Path) -> None:
    path = PI / "badlogic_pi-mono__root-session.jsonl"
    lines = source_lines(path)
    n_msgs = sum(1 for _, e in lines if e is not None and e["type"] == "message")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "import", "auto", str(path)])
    assert result.exit_code == 0, result.output
    sid = json.loads(path.read_bytes().split(b"\n", 1)[0])["id"]
    assert result.stdout == (
        f"{sid}  {len(lines)} entries  {n_msgs} messages  1 warnings  (pi: {path})\n"
    )
    assert "line 440: invalid JSON" in result.stderr


def test_a_v2_file_reads_hook_messages_as_custom_messages() -> None:
    rows = [
        {
            "type": "session",
            "version": 2,
            "id": "v2-demo",
            "timestamp": "2025-06-01T00:00:00Z",
            "cwd": "/p",
        },
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "timestamp": "2025-06-01T00:00:01Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "timestamp": "2025-06-01T00:00:02Z",
            "message": {
                "role": "hookMessage",
                "customType": "lint",
                "content": "2 warnings",
                "display": True,
            },
        },
        {
            "type": "compaction",
            "id": "c",
            "parentId": "b",
            "timestamp": "2025-06-01T00:00:03Z",
            "summary": "went",
            "firstKeptEntryId": "b",
            "tokensBefore": 10,
            "fromHook": True,
        },
    ]
    s = pi.import_session(tl.open_store("memory://"), jsonl(rows))
    hook = s.entry("b").payload
    assert (hook.role, hook.text) == ("custom", "2 warnings")
    assert hook.provider_details == {
        "pi": {"customType": "lint", "display": True, "role": "hookMessage"}
    }
    comp = s.entry("c")
    assert isinstance(comp, CompactionEntry)
    assert comp.compaction.details == {"pi": {"fromHook": True}}
    assert [(m.role, m.text) for m in s.context().messages] == [
        ("compactionSummary", "went"),
        ("custom", "2 warnings"),
    ]


@st.composite
def pi_trees(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random pi v3 session: entries under random earlier parents (branches, new roots),
    messages, branch summaries, custom messages, compactions keeping a random ancestor."""
    n = draw(st.integers(1, 30))
    rows: list[dict[str, Any]] = [
        {
            "type": "session",
            "version": 3,
            "id": "prop",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/",
        }
    ]
    ids: list[str] = []
    parents: dict[str, str | None] = {}
    for k in range(n):
        eid = f"e{k}"
        parent = draw(st.sampled_from([None, *ids])) if ids else None
        ts = f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}Z"
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "branch_summary",
                    "custom_message",
                    "compaction",
                    "label",
                    "model_change",
                ]
            )
        )
        row: dict[str, Any] = {"id": eid, "parentId": parent, "timestamp": ts}
        if kind in ("user", "assistant"):
            row |= {
                "type": "message",
                "message": {"role": kind, "content": [{"type": "text", "text": f"{kind} {k}"}]},
            }
        elif kind == "branch_summary":
            row |= {
                "type": "branch_summary",
                "fromId": parent or "x",
                "summary": draw(st.sampled_from(["", f"summary {k}"])),
            }
        elif kind == "custom_message":
            row |= {
                "type": "custom_message",
                "customType": "note",
                "content": f"note {k}",
                "display": False,
            }
        elif kind == "compaction":
            ancestors = []
            cur = parent
            while cur is not None:
                ancestors.append(cur)
                cur = parents[cur]
            first = draw(st.sampled_from([*ancestors, "gone"]))
            row |= {
                "type": "compaction",
                "summary": f"compacted {k}",
                "firstKeptEntryId": first,
                "tokensBefore": k,
            }
        elif kind == "label":
            row |= {
                "type": "label",
                "targetId": draw(st.sampled_from([*ids, eid])),
                "label": f"l{k}",
            }
        else:
            row |= {"type": "model_change", "provider": "p", "modelId": f"m{k}"}
        rows.append(row)
        ids.append(eid)
        parents[eid] = parent
    return rows


@settings(max_examples=60, deadline=None)
@given(pi_trees())
def test_random_pi_trees_import_with_pis_context(rows: list[dict[str, Any]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.jsonl"
        path.write_bytes(jsonl(rows))
        s = pi.import_session(tl.open_store("memory://"), path)
        want = reference_context(path)
    assert {e.id: e.parent_id for e in s.entries()} == {r["id"]: r["parentId"] for r in rows[1:]}
    assert [m.role for m in s.context().messages] == [ROLE.get(r, r) for r in want]
