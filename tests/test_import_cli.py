"""``threadline import`` and ``threadline export`` over the real transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import threadline as tl
from conftest import REALDATA
from threadline import importing
from threadline.cli.main import cli
from threadline.formats import anthropic

FORMAT_OF_DIR = {
    "pi_session": "pi",
    "claude_code": "claude_code",
    "chatgpt_export": "chatgpt_export",
    "codex_cli": "codex",
    "google_adk": "google_adk",
}
TRANSCRIPTS = sorted(
    p
    for d in FORMAT_OF_DIR
    for p in (REALDATA / d).iterdir()
    if p.suffix in (".jsonl", ".json")
    and not p.name.endswith("assistant-message-with-thinking-code.json")
)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.name)
def test_auto_detects_the_format_of_every_real_transcript(path: Path) -> None:
    assert importing.detect(path) == FORMAT_OF_DIR[path.parent.name]


def test_import_json_prints_one_object_per_created_session(tmp_path: Path) -> None:
    path = REALDATA / "chatgpt_export" / "LibreChat_via_Apollo_ui__chatgpt-export.json"
    res = CliRunner().invoke(cli, ["--store", str(tmp_path), "import", "--json", "auto", str(path)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    convs = json.loads(path.read_text())
    assert [r["session_id"] for r in rows] == [c["conversation_id"] for c in convs]
    store = tl.open_store(tmp_path)
    for row in rows:
        s = store.open(row["session_id"])
        assert (row["entries"], row["messages"], row["context_messages"], row["warnings"]) == (
            len(s.entry_ids()),
            s.message_count(),
            len(s.context().messages),
            0,
        )
        assert row["format"] == "chatgpt_export"


def test_an_unknown_format_exits_2_with_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--store", str(tmp_path), "import", "slack", "x.json"])
    assert res.exit_code == 2
    assert res.stderr == (
        "Error: Unknown import format 'slack'; use one of: pi, claude_code, "
        "chatgpt_export, codex, google_adk, chat_history or auto\n"
    )


def test_a_file_that_is_not_what_it_claims_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    path = REALDATA / "codex_cli" / "jazzyalex_agent-sessions__stage0_codex_small.jsonl"
    res = CliRunner().invoke(cli, ["--store", str(tmp_path / "s"), "import", "pi", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        f"Error: {path}: line 1: not a pi session: the first line must be a "
        '{"type":"session"} header\n'
    )
    assert tl.open_store(tmp_path / "s").list() == []


def test_export_anthropic_of_an_imported_claude_code_session(tmp_path: Path) -> None:
    path = REALDATA / "claude_code" / "marot_spotter__tool_heavy.jsonl"
    runner = CliRunner()
    res = runner.invoke(
        cli, ["--store", str(tmp_path), "import", "--json", "claude_code", str(path)]
    )
    sid = json.loads(res.stdout)["session_id"]
    out = runner.invoke(cli, ["--store", str(tmp_path), "export", sid, "--format", "anthropic"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    anthropic.validate(payload)
    s = tl.open_store(tmp_path).open(sid)
    assert payload == anthropic.dump(list(s.context().messages))


def test_export_makes_any_history_valid_and_strict_refuses_instead(tmp_path: Path) -> None:
    # this excerpt starts with the assistant's tool call: Anthropic wants a user turn first
    path = REALDATA / "claude_code" / "jnarowski_agentcmd__tool-result-image.jsonl"
    runner = CliRunner()
    res = runner.invoke(
        cli, ["--store", str(tmp_path), "import", "--json", "claude_code", str(path)]
    )
    sid = json.loads(res.stdout)["session_id"]
    out = runner.invoke(
        cli, ["--store", str(tmp_path), "export", sid, "--format", "anthropic", "--explain"]
    )
    assert out.exit_code == 0, out.stderr
    payload = json.loads(out.stdout)
    anthropic.validate(payload)
    assert payload["messages"][0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "(The conversation continues from an earlier assistant turn.)"}
        ],
    }
    assert out.stderr.splitlines()[-1] == "1 adjustment(s) for anthropic"
    assert out.stderr.startswith("adjusted [0] leading_user_turn: ")
    strict = runner.invoke(
        cli, ["--store", str(tmp_path), "export", sid, "--format", "anthropic", "--strict"]
    )
    assert strict.exit_code == 2
    assert strict.stderr.startswith(
        "Error: anthropic: the history needs 1 adjustment(s) before "
        "it can be sent: (1) [0] leading_user_turn: "
    )


def test_one_bad_file_among_several_imports_nothing(tmp_path: Path) -> None:
    good = REALDATA / "pi_session" / "marcus_sidecar__pi__tool-session.jsonl"
    bad = REALDATA / "claude_code" / "marot_spotter__short.jsonl"
    res = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "s"), "import", "pi", str(good), str(bad)]
    )
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: {bad}: line 1: not a pi session")
    assert tl.open_store(tmp_path / "s").list() == []


def test_imports_land_the_same_on_every_backend(store: tl.Store) -> None:
    path = REALDATA / "pi_session" / "badlogic_pi-mono__root-session.jsonl"
    (s,) = importing.import_path(store, "pi", path)
    again = store.open(s.id)
    assert again.entry_ids() == s.entry_ids()
    assert again.context().view.ids() == s.context().view.ids()
    report = importing.report_of(again)
    assert report is not None and [n for n, _ in report.corrupt_lines] == [440]
