"""``threadline compact``: preview first, write only without --dry-run, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import threadline as tl
from threadline.cli.main import cli
from threadline.model.content import text, tool_result, tool_use
from threadline.testing import FakeOpenAIServer, HTTPFailure


def _session(root: Path) -> tuple[str, list[str]]:
    store = tl.open_store(root)
    s = store.create()
    ids = []
    for i in range(3):
        ids.append(s.append_message("user", f"request {i}\nmore"))
        ids.append(
            s.append_message(
                "assistant", [text(f"on it {i}"), tool_use(f"t{i}", "read", {"path": f"f{i}.py"})]
            )
        )
        ids.append(s.append_message("tool", [tool_result(f"t{i}", "y" * 300)]))
        ids.append(s.append_message("assistant", f"finished {i}"))
    s.close()
    return s.id, ids


PREVIEW = """Context: 315 tokens
Cut point: keep from entry {kept} (4 entries, ~105 tokens kept)
Would summarize 8 message(s), ~210 tokens:
  user: request 0
  assistant: on it 0
  tool: ← 1 tool result(s)
  assistant: finished 0
  user: request 1
  assistant: on it 1
  tool: ← 1 tool result(s)
  assistant: finished 1
Files read: f0.py, f1.py
Files modified: none
"""


def test_dry_run_shows_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    sid, ids = _session(tmp_path)
    before = (tmp_path / f"{sid}.jsonl").read_bytes()
    r = CliRunner().invoke(
        cli, ["--store", str(tmp_path), "compact", sid, "--dry-run", "--keep-recent", "100"]
    )
    assert r.exit_code == 0
    assert r.output == PREVIEW.format(kept=ids[8]) + "Dry run: nothing written.\n"
    assert (tmp_path / f"{sid}.jsonl").read_bytes() == before


def test_compact_writes_one_compaction_and_refuses_a_second(tmp_path: Path) -> None:
    sid, ids = _session(tmp_path)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path), "compact", sid, "--keep-recent", "100"])
    assert r.exit_code == 0
    s = tl.open_store(tmp_path).open(sid, read_only=True)
    comp = s.path()[-1]
    assert comp.type == "compaction"
    assert r.output == (
        PREVIEW.format(kept=ids[8]) + f"Compacted: entry {comp.id}; context 315 -> 173 tokens.\n"
    )
    again = CliRunner().invoke(cli, ["--store", str(tmp_path), "compact", sid])
    assert again.exit_code == 2
    assert again.output == (
        f"Error: Session '{sid}' was just compacted; add messages before compacting again\n"
    )


def test_llm_summarizer_over_a_local_server_and_its_failure(tmp_path: Path) -> None:
    sid, _ids = _session(tmp_path)
    args = [
        "--store",
        str(tmp_path),
        "compact",
        sid,
        "--keep-recent",
        "100",
        "--summarizer",
        "llm",
        "--model",
        "small",
        "--json",
    ]
    with FakeOpenAIServer([HTTPFailure(503, "busy"), "## Goal\n- requests 0 and 1"]) as srv:
        failed = CliRunner().invoke(cli, [*args, "--base-url", srv.base_url])
        ok = CliRunner().invoke(cli, [*args, "--base-url", srv.base_url])
    assert failed.exit_code == 1
    assert failed.output == (
        f"Error: POST {srv.base_url}/chat/completions failed with HTTP 503: "
        "busy; the server failed; retry later\n"
    )
    assert ok.exit_code == 0
    out = json.loads(ok.output)
    assert out["summary"] == "## Goal\n- requests 0 and 1"
    assert (out["tokens_before"], out["split_turn"], out["read_files"]) == (
        315,
        False,
        ["f0.py", "f1.py"],
    )
    s = tl.open_store(tmp_path).open(sid, read_only=True)
    assert [e.type for e in s.path()].count("compaction") == 1


def test_llm_summarizer_needs_a_model(tmp_path: Path) -> None:
    sid, _ids = _session(tmp_path)
    r = CliRunner().invoke(cli, ["--store", str(tmp_path), "compact", sid, "--summarizer", "llm"])
    assert r.exit_code == 2
    assert r.output == "Error: --summarizer llm needs --model (and --base-url for a local server)\n"
