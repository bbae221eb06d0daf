"""Purge (DESIGN §3): preview, removal from every file of the store, tree kept, crash safety."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import threadline as tl
from threadline import history
from threadline.errors import NotFoundError, StoreError, UserError
from threadline.model.entries import PurgedEntry

SECRET = "hunter2-correct-horse-battery"


def files_holding(directory: Path, needle: str | bytes) -> list[str]:
    data = needle.encode() if isinstance(needle, str) else needle
    return sorted(p.name for p in directory.rglob("*") if p.is_file() and data in p.read_bytes())


def build(store: tl.Store) -> tuple[tl.Session, dict[str, str]]:
    s = store.create()
    ids = {
        "ask": s.append_message("user", f"my password is {SECRET}"),
        "call": s.append_message(
            "assistant", [tl.text("checking"), tl.tool_use("c1", "grep", {"pattern": "x"})]
        ),
        "result": s.append_message("tool", [tl.tool_result("c1", f"found {SECRET}-in-file")]),
        "answer": s.append_message("assistant", "noted"),
        "next": s.append_message("user", "thanks"),
    }
    return s, ids


def test_a_preview_changes_nothing(store: tl.Store) -> None:
    s, ids = build(store)
    before = list(s.state.log.raw_lines())
    plan = s.purge([ids["ask"]])  # type: ignore[attr-defined]
    assert plan.executed is False
    assert plan.entry_ids == [ids["ask"]]
    assert [(i.id, i.type, i.bytes) for i in plan.items] == [
        (ids["ask"], "message", s.metadata()[0].size)
    ]
    assert plan.bytes == s.metadata()[0].size
    assert plan.leaves_view == [ids["ask"]]
    assert plan.also_leaving_view == []
    assert list(s.state.log.raw_lines()) == before
    assert s.context().messages[0].text == f"my password is {SECRET}"


def test_a_preview_names_the_tool_partner_that_leaves_the_view(store: tl.Store) -> None:
    s, ids = build(store)
    plan = s.purge([ids["result"]])  # type: ignore[attr-defined]
    assert plan.leaves_view == [ids["result"]]
    assert plan.also_leaving_view == [ids["call"]]


def test_purge_keeps_the_tree_and_drops_the_entries_from_the_view(store: tl.Store) -> None:
    s, ids = build(store)
    shape = [(m.id, m.parent_id, m.timestamp, m.entry_type) for m in s.metadata()]
    plan = s.purge([ids["ask"], ids["result"]], dry_run=False)  # type: ignore[attr-defined]
    assert plan.executed is True
    assert [(m.id, m.parent_id, m.timestamp, m.entry_type) for m in s.metadata()] == shape
    assert [m.text for m in s.context().messages] == ["noted", "thanks"]
    assert isinstance(s.entry(ids["ask"]), PurgedEntry)
    s.close()
    again = store.open(s.id)
    assert [(m.id, m.parent_id, m.timestamp, m.entry_type) for m in again.metadata()] == shape
    assert [m.text for m in again.context().messages] == ["noted", "thanks"]
    assert msgspec.to_builtins(again.entry(ids["result"])) is not None
    assert again.entry(ids["answer"]).payload.text == "noted"
    assert not any(SECRET.encode() in line for line in again.state.log.raw_lines())


def test_the_purged_line_is_a_marker_and_other_lines_are_untouched(store: tl.Store) -> None:
    s, ids = build(store)
    before = list(s.state.log.raw_lines())
    s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    after = list(s.state.log.raw_lines())
    marker = msgspec.json.decode(after[0])
    assert marker == {
        "type": "message",
        "id": ids["ask"],
        "parent_id": None,
        "timestamp": msgspec.json.decode(before[0])["timestamp"],
        "message": {"purged": True},
    }
    assert after[1 : len(before)] == before[1:]
    assert msgspec.json.decode(after[-1])["purge"] == {"entry_ids": [ids["ask"]]}


def test_unknown_records_survive_a_purge_byte_for_byte(store: tl.Store) -> None:
    s, ids = build(store)
    s.close()
    unknown = b'{"type":"future_thing","id":"u1","parent_id":null,"timestamp":"t","x":1}'
    w = store.open(s.id)
    w.state.ensure_writer()
    w.state.log.append([unknown])
    w.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    assert unknown in list(w.state.log.raw_lines())


def test_purge_all_removes_every_payload(store: tl.Store) -> None:
    s, ids = build(store)
    plan = s.purge(all=True, dry_run=False)  # type: ignore[attr-defined]
    assert sorted(plan.entry_ids) == sorted(ids.values())
    assert list(s.context().messages) == []
    assert all(isinstance(e, PurgedEntry) for e in s.entries())


def test_purging_a_purged_entry_again_changes_nothing(store: tl.Store) -> None:
    s, ids = build(store)
    s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    lines = list(s.state.log.raw_lines())
    plan = s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    assert plan.entry_ids == []
    assert [i.already_purged for i in plan.items] == [True]
    assert list(s.state.log.raw_lines()) == lines


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, UserError, "name the entries to purge"),
        ({"entry_ids": ["nope"]}, NotFoundError, "Entry 'nope' not found"),
        ({"entry_ids": ["x"], "all": True}, UserError, "give entry ids or all=True, not both"),
    ],
)
def test_bad_purge_requests_are_refused(
    store: tl.Store, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    s, _ = build(store)
    with pytest.raises(error, match=message):
        s.purge(**kwargs)  # type: ignore[attr-defined]


def test_a_read_only_session_cannot_purge(store: tl.Store) -> None:
    s, ids = build(store)
    s.close()
    ro = store.open(s.id, read_only=True)
    assert ro.purge([ids["ask"]]).executed is False  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="read-only"):
        ro.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]


def test_the_purged_text_is_gone_from_every_file_of_the_store(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    store = tl.open_store(directory)
    s, ids = build(store)
    s.state.log.backup("migrate")
    assert [r.first_message for r in store.list()] == [f"my password is {SECRET}"]
    s.close()
    # a torn tail: a crashed earlier write of the same message, cut inside the secret
    path = directory / f"{s.id}.jsonl"
    with open(path, "ab") as fh:
        fh.write(
            b'{"type":"message","id":"torn1","parent_id":null,"timestamp":"t","message":'
            + f'{{"role":"user","content":[{{"type":"text","text":{{"content":"my password is '
            f"{SECRET[:12]}".encode()
        )
    w = store.open(s.id)
    w.append_message("user", "after the tear")
    assert files_holding(directory, SECRET[:12]) == [
        ".list-cache.json",
        f"{s.id}.jsonl",
        f"{s.id}.jsonl.migrate.bak",
        f"{s.id}.jsonl.torn",
    ]
    plan = w.purge([ids["ask"], ids["result"]], dry_run=False)  # type: ignore[attr-defined]
    assert sorted(Path(f).name for f in plan.files) == [
        f"{s.id}.jsonl.migrate.bak",
        f"{s.id}.jsonl.torn",
    ]
    assert files_holding(directory, SECRET[:12]) == []
    assert files_holding(directory, SECRET[-12:]) == []
    # the backup keeps everything else
    bak = (directory / f"{s.id}.jsonl.migrate.bak").read_bytes()
    assert b'"noted"' in bak and ids["ask"].encode() in bak
    assert [r.first_message for r in store.list()] == ["thanks"]  # the first input left


def test_on_the_sqlite_store_the_purged_text_is_in_no_file_while_the_store_is_open(
    tmp_path: Path,
) -> None:
    store = tl.open_store(f"sqlite:///{tmp_path / 'store.db'}")
    s, ids = build(store)
    assert store.catalog.search("hunter2", mode="keyword")  # the catalog indexed the secret
    assert files_holding(tmp_path, SECRET[:12])  # in the database or its WAL
    # the records keep the secret deflated (schema version 4): their rows' bytes are looked
    # for as they are stored
    rows = [
        bytes(raw)
        for (raw,) in store.backend.conn.execute(  # type: ignore[attr-defined]
            "SELECT raw FROM tl_records WHERE id IN (?, ?)", (ids["ask"], ids["result"])
        )
    ]
    assert len(rows) == 2 and all(raw[0] == 1 and SECRET.encode() not in raw for raw in rows)
    assert all(files_holding(tmp_path, raw) for raw in rows)
    s.purge([ids["ask"], ids["result"]], dry_run=False)  # type: ignore[attr-defined]
    # still open: no checkpoint at close helps; the WAL and freed pages must already be clean
    assert files_holding(tmp_path, SECRET[:12]) == []
    assert files_holding(tmp_path, SECRET[-12:]) == []
    assert [files_holding(tmp_path, raw) for raw in rows] == [[], []]
    assert store.catalog.search("hunter2", mode="keyword") == []
    s.close()
    store.close()


def test_torn_debris_without_purged_content_is_kept(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s, ids = build(store)
    s.close()
    with open(tmp_path / f"{s.id}.jsonl", "ab") as fh:
        fh.write(b'{"type":"message","id":"unrelated-partial')
    w = store.open(s.id)
    w.append_message("user", "more")
    w.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    assert (tmp_path / f"{s.id}.jsonl.torn").read_bytes() == (
        b'{"type":"message","id":"unrelated-partial\n'
    )


def test_a_failure_before_the_rename_leaves_the_old_file_and_a_rerun_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadline.store import jsonl

    store = tl.open_store(tmp_path)
    s, ids = build(store)
    path = tmp_path / f"{s.id}.jsonl"
    old = path.read_bytes()

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl.os, "replace", failing_replace)
    with pytest.raises(
        StoreError,
        match=r"No space left on device\); the old file is "
        "unchanged",
    ):
        s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    monkeypatch.undo()
    now = path.read_bytes()
    assert now.startswith(old)  # the old file, plus the purge record appended before the rewrite
    assert [msgspec.json.decode(x)["type"] for x in now[len(old) :].splitlines()] == ["purge"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    s.close()
    again = store.open(s.id)
    assert [m.text for m in again.context().messages] == ["checking", "", "noted", "thanks"]
    plan = again.purge([ids["answer"]])  # type: ignore[attr-defined]
    assert plan.pending == [ids["ask"]]
    again.purge([ids["answer"]], dry_run=False)  # type: ignore[attr-defined]
    assert files_holding(tmp_path, SECRET) == [f"{s.id}.jsonl"]  # the tool result was not named
    assert isinstance(again.entry(ids["ask"]), PurgedEntry)


CHILD = textwrap.dedent("""
    import os, sys, time
    import threadline as tl
    from threadline.store import jsonl

    real = os.write
    def slow(fd, data):  # small, slow writes so a kill lands in the middle of the rewrite
        time.sleep(0.0005)
        return real(fd, bytes(data[:97]))
    jsonl._write = slow
    store = tl.open_store(sys.argv[1])
    s = store.open(sys.argv[2])
    print("ready", flush=True)
    s.purge([sys.argv[3]], dry_run=False)
    print("done", flush=True)
""")


def _purge_in_child(
    directory: Path, session_id: str, entry_id: str, kill_after: float | None
) -> float:
    """Run a slow purge in a child process; SIGKILL it ``kill_after`` seconds after it is ready.
    Returns how long the child ran after it was ready."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), session_id, entry_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    with child.stdout:
        assert child.stdout.readline().strip() == "ready"
        start = time.monotonic()
        if kill_after is None:
            assert child.stdout.readline().strip() == "done"
        else:
            time.sleep(kill_after)
            child.send_signal(signal.SIGKILL)
        child.wait()
    return time.monotonic() - start


def _session_with_filler(directory: Path) -> tuple[tl.Store, tl.Session, dict[str, str]]:
    store = tl.open_store(directory)
    s, ids = build(store)
    for i in range(60):  # enough lines that the slow rewrite takes a while
        s.append_message("user" if i % 2 else "assistant", f"filler {i} " + "x" * 200)
    s.close()
    return store, s, ids


@pytest.mark.slow
def test_a_kill_during_purge_leaves_either_the_old_or_the_new_file(tmp_path: Path) -> None:
    _, s, ids = _session_with_filler(tmp_path / "calibrate")
    full = _purge_in_child(tmp_path / "calibrate", s.id, ids["ask"], None)
    rng = random.Random(5)
    # at once (before anything is renamed), at random points of the run, and long after it
    delays = [0.0, *(rng.uniform(0.0, full) for _ in range(10)), 2 * full + 0.5]
    outcomes = set()
    for round_no, delay in enumerate(delays):
        directory = tmp_path / f"r{round_no}"
        store, s, ids = _session_with_filler(directory)
        expected = {e.id: msgspec.to_builtins(e) for e in store.open(s.id).entries()}
        _purge_in_child(directory, s.id, ids["ask"], delay)
        after = store.open(s.id, read_only=True)
        got = {e.id: e for e in after.entries()}
        assert list(got) == list(expected)
        purged = isinstance(got[ids["ask"]], PurgedEntry)
        outcomes.add(purged)
        for eid, rec in got.items():
            if eid != ids["ask"]:
                assert msgspec.to_builtins(rec) == expected[eid]
        main = (directory / f"{s.id}.jsonl").read_bytes()
        if purged:
            assert f"my password is {SECRET}".encode() not in main
        else:
            assert after.entry(ids["ask"]).payload.text == f"my password is {SECRET}"
    assert outcomes == {False, True}  # the kills landed both before and after the rename


def test_purge_hooks_and_the_store_catalog_forget_the_entries(
    store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, list[str]]] = []
    monkeypatch.setattr(history, "_hooks", list(history._hooks))  # the catalog's hook stays

    def forget(session_id: str, entry_ids: list[str]) -> None:
        calls.append(("catalog", session_id, entry_ids))

    monkeypatch.setattr(store.catalog, "forget", forget)
    history.on_purge(lambda st, sid, eids: calls.append(("hook", sid, eids)))
    s, ids = build(store)
    s.purge([ids["ask"]])  # type: ignore[attr-defined]
    assert calls == []  # a preview tells nobody
    s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    assert calls == [("catalog", s.id, [ids["ask"]]), ("hook", s.id, [ids["ask"]])]


def test_a_failing_index_hook_is_reported_after_the_file_is_clean(
    store: tl.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "_hooks", [])

    def broken(st: Any, sid: str, eids: list[str]) -> None:
        raise RuntimeError("index offline")

    history.on_purge(broken)
    s, ids = build(store)
    with pytest.raises(
        StoreError, match=r"could not forget them .*index offline.*rebuild the catalog$"
    ):
        s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    assert not any(SECRET.encode() in line for line in list(s.state.log.raw_lines())[:1])


def test_stats_count_the_marker_sizes_after_a_purge(store: tl.Store) -> None:
    s, ids = build(store)
    s.purge([ids["ask"]], dry_run=False)  # type: ignore[attr-defined]
    marker = next(
        line
        for line in s.state.log.raw_lines()
        if ids["ask"].encode() in line and b'"purged":true' in line
    )
    assert s.metadata()[0].size == len(marker)
    assert s.stats()["context_messages"] == 4


def test_the_search_index_forgets_purged_text(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s, ids = build(store)
    assert [h.entry_id for h in store.catalog.search(SECRET, mode="keyword")] == [
        ids["ask"],
        ids["result"],
    ]
    s.purge([ids["ask"], ids["result"]], dry_run=False)  # type: ignore[attr-defined]
    assert store.catalog.search(SECRET, mode="keyword") == []
    store.close()
    assert files_holding(tmp_path, SECRET) == []


def test_cli_purge_previews_without_yes(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s, ids = build(store)
    s.close()
    exe = [
        sys.executable,
        "-c",
        "from threadline.cli.main import main; main()",
        "--store",
        str(tmp_path),
    ]
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run(
        [*exe, "purge", s.id, ids["ask"]], capture_output=True, text=True, env=env, check=True
    ).stdout
    size = store.open(s.id).metadata()[0].size
    assert out.splitlines() == [
        f"Would purge 1 entries ({size:,} bytes) from session {s.id}:",
        f"  {ids['ask']}  message         {size:>10,} bytes",
        "Nothing was changed. Run again with --yes to purge; the content cannot be recovered "
        "afterwards.",
    ]
    assert files_holding(tmp_path, SECRET) != []
    subprocess.run(
        [*exe, "purge", s.id, ids["ask"], ids["result"], "--yes"],
        env=env,
        check=True,
        capture_output=True,
    )
    assert files_holding(tmp_path, SECRET) == []
    bad = subprocess.run([*exe, "purge", s.id, "nope"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2
    assert bad.stderr.startswith("Error: No entry 'nope' (id, unique id prefix or label)")


def test_cli_metadata_lists_every_entry_without_content(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    store = tl.open_store(tmp_path)
    s, ids = build(store)
    s.close()
    metas = store.open(s.id).metadata()
    out = CliRunner().invoke(cli, ["--store", str(tmp_path), "metadata", s.id]).output
    kinds = ["input_text", "function_call", "function_call_output", "output_text", "input_text"]
    assert out.splitlines() == [
        f"{m.id}  {m.timestamp}  {k:<20} {m.size:>10,} bytes"
        for m, k in zip(metas, kinds, strict=True)
    ]
    rows = msgspec.json.decode(
        CliRunner().invoke(cli, ["--store", str(tmp_path), "metadata", s.id, "--json"]).output
    )
    assert [(r["id"], r["type"], r["entry_type"], r["parent_id"]) for r in rows] == [
        (ids["ask"], "input_text", "message", None),
        (ids["call"], "function_call", "message", ids["ask"]),
        (ids["result"], "function_call_output", "message", ids["call"]),
        (ids["answer"], "output_text", "message", ids["result"]),
        (ids["next"], "input_text", "message", ids["answer"]),
    ]
    assert SECRET not in out


def test_cli_purge_preview_lists_both_kinds_of_derived_summary(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s = store.create()
    first = s.append_message("user", "start")
    ask = s.append_message("user", f"my password is {SECRET}")
    kept = s.append_message("user", "go on")
    comp = s.append_compaction("A password was shared.", kept, 10)  # reworded: by range
    s.branch(first)
    s.append_message("user", "elsewhere")
    copy = s.append_compaction(f"Someone typed {SECRET}.", None, 10)  # elsewhere: by copy
    s.close()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from threadline.cli.main import main; main()",
            "--store",
            str(tmp_path),
            "purge",
            s.id,
            ask,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        check=True,
    ).stdout.splitlines()
    assert f"Summaries made from purged entries (their summary is removed): {comp}" in out
    assert f"Summaries that copied purged text (the copied text becomes [purged]): {copy}" in out
