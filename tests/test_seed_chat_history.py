"""The wrapped-chat-history seed (002), from its own examples: ChatHistoryManager over
chat_history.json, automatic and explicit migration, the history tools' fields, export that keeps
content exactly as stored."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import threadline as tl
from threadline.cli.main import cli
from threadline.formats.chat_history import ChatHistoryManager

OLD = [
    {"role": "user", "content": [{"type": "input_text", "text": "User's message here"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "One file: a.txt"}],
    },
    {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
]


def test_the_manager_migrates_an_old_file_on_first_load_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "chat_history.json"
    path.write_text(json.dumps(OLD), encoding="utf-8")
    said: list[str] = []
    mgr = ChatHistoryManager(path, echo=said.append)
    [backup] = sorted(tmp_path.glob("chat_history.json.*.bak"))
    assert said == [
        f"Migrated {path} to the wrapped format: 6 entries wrapped with id, ts, "
        f"type and size; backup at {backup}"
    ]
    assert json.loads(backup.read_text()) == OLD
    wrapped = mgr.get_wrapped_history()
    assert [e["type"] for e in wrapped] == [
        "input_text",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "output_text",
    ]
    assert all(set(e) == {"id", "ts", "type", "size", "content"} for e in wrapped)
    assert wrapped[0]["size"] == len(json.dumps(OLD[0]).encode())
    # get_history() still returns exactly what OpenAI expects
    assert mgr.get_history() == OLD
    # a second manager finds the wrapped file and says nothing
    again: list[str] = []
    assert ChatHistoryManager(path, echo=again.append).get_history() == OLD and again == []


def test_add_append_get_and_delete_by_id(tmp_path: Path) -> None:
    mgr = ChatHistoryManager(tmp_path / "chat_history.json", echo=lambda _: None)
    first = mgr.add_entry({"role": "user", "content": [{"type": "input_text", "text": "hi"}]})
    ids = mgr.append_entries(
        [
            {"type": "reasoning", "id": "rs_2", "summary": []},
            {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        ]
    )
    assert len({first, *ids}) == 3
    entry = mgr.get_entry_by_id(ids[0])
    assert entry is not None and entry["type"] == "reasoning" and entry["id"] == ids[0]
    assert mgr.get_entry_by_id("nope") is None
    # "Filter for entries you want to delete (e.g., reasoning entries)" from the seed
    doomed = [e["id"] for e in mgr.get_metadata() if e["type"] == "reasoning"]
    assert mgr.delete_entries_by_ids(doomed) == 1
    assert [e["id"] for e in mgr.get_wrapped_history()] == [first, ids[1]]
    stats = mgr.get_stats()
    assert (stats["total_entries"], sorted(stats["stats_by_type"])) == (
        2,
        ["input_text", "output_text"],
    )
    assert mgr.delete_all() == 2 and mgr.get_history() == []


def test_migrate_chat_history_reports_detailed_statistics(tmp_path: Path) -> None:
    path = tmp_path / "chat_history.json"
    path.write_text(json.dumps(OLD), encoding="utf-8")
    res = CliRunner().invoke(cli, ["migrate-chat-history", str(path)])
    assert res.exit_code == 0, res.output
    [backup] = sorted(tmp_path.glob("chat_history.json.*.bak"))
    entries = json.loads(path.read_text())
    sizes = {e["type"]: e["size"] for e in entries}
    total = sum(sizes.values())
    stamps = sorted(e["ts"] for e in entries)
    assert res.output.splitlines() == [
        f"Migrated {path} to the wrapped format",
        f"Backup: {backup}",
        "Total entries: 6",
        f"Total size: {round(total / 1024, 2)} KB",
        "By type:",
        *[f"  {k:<22}{1:>6} entries {sizes[k]:>10,} bytes" for k in sorted(sizes)],
        f"Oldest: {stamps[0]}",
        f"Newest: {stamps[-1]}",
        "Sizes: <1KB: 6, 1-10KB: 0, 10-100KB: 0, >=100KB: 0",
    ]
    again = CliRunner().invoke(cli, ["migrate-chat-history", str(path)])
    assert (
        again.output.splitlines()[0] == f"{path} is already in the wrapped format; nothing "
        "to migrate"
    )
    missing = CliRunner().invoke(cli, ["migrate-chat-history", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_export_keeps_content_exactly_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "chat_history.json"
    path.write_text(json.dumps(OLD), encoding="utf-8")
    wrapped = ChatHistoryManager(path, echo=lambda _: None).get_wrapped_history()
    store = tl.open_store(tmp_path / "store")
    res = CliRunner().invoke(
        cli,
        [
            "--store",
            str(tmp_path / "store"),
            "import",
            "chat_history",
            str(path),
            "--session-id",
            "ch",
        ],
    )
    assert res.exit_code == 0, res.output
    out = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "store"), "export", "ch", "--format", "chat_history"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == wrapped  # ids, ts, type, size and content, unchanged
    assert store.open("ch").context().messages[5].text == "Done."


def test_history_tools_answer_with_the_seeds_fields() -> None:
    s = tl.open_store("memory://").create()
    s.append_message("user", [{"type": "input_text", "text": "hi"}])
    s.append_message("assistant", [tl.tool_use("c1", "ls", {})])
    s.append_message("tool", [tl.tool_result("c1", "a.txt")])
    s.append_message("assistant", [tl.thinking("hmm")])
    s.append_message("assistant", "done")
    s.append_message("system", "be brief")
    metas = s.metadata()
    assert [(m.type, m.entry_type) for m in metas] == [
        ("input_text", "message"),
        ("function_call", "message"),
        ("function_call_output", "message"),
        ("reasoning", "message"),
        ("output_text", "message"),
        ("message", "message"),
    ]
    assert all(m.ts == m.timestamp and m.size > 0 for m in metas)
    st = s.stats()
    assert st["total_entries"] == 6
    assert st["total_size_kb"] == round(sum(m.size for m in metas) / 1024, 2)
    assert st["stats_by_type"]["function_call"] == {"count": 1, "size": metas[1].size}
