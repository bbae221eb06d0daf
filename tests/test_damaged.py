"""One bad line costs only that line; a damaged session is listed and flagged, and never hides
the others: in the library, ``threadline sessions``, the viewer's home page and MCP (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import threadline as tl
from threadline.cli.main import cli
from threadline.web import create_app

STAMP = b'"2024-01-01T00:00:00Z"'
BAD_LINES = {
    "utf8_in_id": b'{"type":"message","id":"\xff\xfe","parent_id":null,"timestamp":'
    + STAMP
    + b',"message":{"role":"user","content":[]}}',
    "utf8_in_type": b'{"type":"mess\xc3age","id":"x1","parent_id":null,"timestamp":'
    + STAMP
    + b',"message":{"role":"user","content":[]}}',
    "utf8_in_timestamp": b'{"type":"message","id":"x2","parent_id":null,"timestamp":"2024\xe2",'
    b'"message":{"role":"user","content":[]}}',
    "nested_1000_deep": b'{"type":"custom","id":"x3","parent_id":null,"timestamp":'
    + STAMP
    + b',"custom":{"custom_type":"a","data":'
    + b"[" * 1000
    + b"]" * 1000
    + b"}}",
}
REASONS = {
    "utf8_in_id": "invalid UTF-8 at byte 24",
    "utf8_in_type": "invalid UTF-8 at byte 13",
    "utf8_in_timestamp": "invalid UTF-8 at byte 62",
    "nested_1000_deep": "JSON nested too deeply",
}


def damaged_store(root: Path, bad: bytes) -> tl.Store:
    """Three sessions: 'good', 'hurt' (one bad line between two good ones), 'broken' (no
    header at all)."""
    store = tl.open_store(root)
    with store.create(session_id="good") as s:
        s.append_message("user", "fine session")
    with store.create(session_id="hurt") as s:
        s.append_message("user", "before the bad line")
    with open(root / "hurt.jsonl", "ab") as fh:
        fh.write(bad + b"\n")
    with store.open("hurt") as s:
        s.append_message("assistant", "after the bad line")
    (root / "broken.jsonl").write_bytes(b"not a header at all")
    return store


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_costs_only_that_line(tmp_path: Path, case: str) -> None:
    store = damaged_store(tmp_path, BAD_LINES[case])
    s = store.open("hurt")
    assert [m.text for m in s.context().messages] == ["before the bad line", "after the bad line"]
    assert s.load_report.corrupt_lines == [(3, REASONS[case])]


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_damaged_sessions_are_listed_flagged_and_hide_nothing(tmp_path: Path, case: str) -> None:
    store = damaged_store(tmp_path, BAD_LINES[case])
    listing = store.list()
    rows = {r.id: r for r in listing}
    assert sorted(rows) == ["good", "hurt"]
    assert rows["good"].damaged is None
    assert rows["hurt"].damaged == (
        "1 unreadable line skipped; run 'threadline show hurt' to see which"
    )
    assert rows["hurt"].message_count == 2
    assert listing.skipped == [
        ("broken", f"{tmp_path}/broken.jsonl has no complete header line; restore it from a backup")
    ]


def test_the_cli_lists_every_session_and_flags_the_damaged_ones(tmp_path: Path) -> None:
    damaged_store(tmp_path, BAD_LINES["utf8_in_id"])
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "sessions"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    lines = sorted(
        line.split("  ")[0] + ("  DAMAGED" if "DAMAGED" in line else "")
        for line in result.stdout.splitlines()
    )
    assert lines == ["good", "hurt  DAMAGED"]
    assert "Skipped unreadable session 'broken'" in result.stderr
    shown = CliRunner().invoke(cli, ["--store", str(tmp_path), "show", "hurt"])
    assert shown.exit_code == 0
    assert "warning: line 3 skipped: invalid UTF-8 at byte 24" in shown.output


def test_the_viewer_home_page_lists_damaged_sessions(tmp_path: Path) -> None:
    store = damaged_store(tmp_path, BAD_LINES["nested_1000_deep"])
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    got = client.get("/api/sessions")
    assert got.status_code == 200
    flags = {r["id"]: r["damaged"] is not None for r in got.json()["sessions"]}
    assert flags == {"good": False, "hurt": True}
    assert [s["id"] for s in got.json()["skipped"]] == ["broken"]


def test_mcp_list_sessions_lists_damaged_sessions(tmp_path: Path) -> None:
    from mcp_client import Called, Client, over_stdio

    damaged_store(tmp_path, BAD_LINES["utf8_in_timestamp"])

    async def go(cs: Client) -> Called:
        return await cs.call_tool("list_sessions", {})

    result = over_stdio(tmp_path, tmp_path / "mcp.err", go)
    assert not result.is_error
    flags = {r["id"]: r["damaged"] is not None for r in result.structured_content["sessions"]}
    assert flags == {"good": False, "hurt": True}
    assert [s["id"] for s in result.structured_content["skipped"]] == ["broken"]
