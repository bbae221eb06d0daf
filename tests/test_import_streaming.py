"""Streaming import: what the importers write is unchanged, and memory does not grow with the file.

The digests in ``data/import_digests.json`` were taken from the importer as it was before it
streamed (it built every record in memory, then wrote them): each real transcript imported
with ids drawn from a counter and a fixed clock. The streamed import must write the same bytes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

import threadline as tl
from conftest import REALDATA, make_store
from threadline import importing
from threadline.catalog import sqlite as catalog_sqlite
from threadline.cli.main import cli
from threadline.formats import chat_history, pi
from threadline.store import postgres as store_postgres
from threadline.store import sqlite as store_sqlite
from threadline.store.jsonl import JsonlStore

DIGESTS: dict[str, str] = json.loads(
    (Path(__file__).parent / "data" / "import_digests.json").read_text()
)
DIGESTS.pop("_comment")
FORMAT_OF = {
    "pi_session": "pi",
    "claude_code": "claude_code",
    "codex_cli": "codex",
    "chatgpt_export": "chatgpt_export",
    "google_adk": "google_adk",
}
PI_FILES = sorted((REALDATA / "pi_session").glob("*.jsonl"))
STAMP = "2026-01-01T00:00:00.000Z"


def imported_digest(fmt: str, path: Path, directory: Path, mp: pytest.MonkeyPatch) -> str:
    """SHA-256 of the session files an import of ``path`` writes, ids and clock made fixed.

    The header names the file imported (``import.source``); the folder of the real transcripts
    is replaced by ``<realdata>`` so the digest does not depend on where the checkout lives."""
    counter = itertools.count()
    mp.setattr(importing, "new_id", lambda: f"id{next(counter):06d}")
    mp.setattr(importing, "now", lambda: STAMP)
    mp.setattr(chat_history, "now", lambda: STAMP)
    store = tl.Store(JsonlStore(directory))
    h = hashlib.sha256()
    for s in importing.import_path(store, fmt, path):
        written = (directory / f"{s.id}.jsonl").read_bytes()
        h.update(written.replace(str(REALDATA).encode(), b"<realdata>"))
        s.close()
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_the_streamed_import_writes_what_the_in_memory_import_wrote(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REALDATA / name
    fmt = FORMAT_OF[path.parent.name]
    assert imported_digest(fmt, path, tmp_path, monkeypatch) == DIGESTS[name]


@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_a_draft_spooled_to_disk_writes_the_same_bytes(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a spool of 1 KiB moves to its temporary file after a few records
    monkeypatch.setattr(importing.Draft, "SPOOL_IN_MEMORY", 1024)
    digest = imported_digest("pi", path, tmp_path, monkeypatch)
    assert digest == DIGESTS[f"pi_session/{path.name}"]


class Entry(dict[str, Any]):
    """A pi entry that can be watched (a plain dict cannot have weak references)."""


def watched_session(n: int, pulled: list[int], added: list[int]) -> Iterator[Entry]:
    """A pi v3 session of ``n`` linked messages, read one entry at a time. Each entry, when it
    is pulled, checks that every entry before it was already converted and added, and that
    none of the decoded entries before the previous one is still alive."""
    alive: list[weakref.ref[Entry]] = []
    yield Entry(type="session", version=3, id="lazy", timestamp=STAMP)
    for k in range(n):
        assert added[0] == k, f"entry {k} pulled with {added[0]} added: the source was read ahead"
        held = [i for i, ref in enumerate(alive[:-1]) if ref() is not None]
        assert held == [], f"decoded entries {held} are still held"
        entry = Entry(
            type="message",
            id=f"e{k}",
            parentId=f"e{k - 1}" if k else None,
            timestamp=STAMP,
            message={"role": "user" if k % 2 == 0 else "assistant", "content": f"m{k}"},
        )
        alive.append(weakref.ref(entry))
        pulled[0] += 1
        yield entry


def test_pi_reads_its_source_one_entry_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    pulled, added = [0], [0]
    add = importing.Draft.add

    def counting_add(self: importing.Draft, record: Any) -> str:
        added[0] += 1
        return add(self, record)

    monkeypatch.setattr(importing.Draft, "add", counting_add)
    source = watched_session(500, pulled, added)
    (draft,) = pi.parse(cast(Any, source), name="lazy")
    assert (pulled[0], added[0], draft.entries, draft.messages) == (500, 500, 500, 500)
    assert not hasattr(draft, "records")  # a draft keeps encoded lines, not records
    store = tl.open_store("memory://")
    (sid,) = importing.create(store, [draft])
    s = store.open(sid)
    assert [m.text for m in s.context().messages] == [f"m{k}" for k in range(500)]


def test_a_materialised_source_is_what_the_lazy_check_catches() -> None:
    # the check above would fail for an importer that read the whole source first
    pulled, added = [0], [0]
    with pytest.raises(AssertionError, match="read ahead"):
        list(watched_session(3, pulled, added))


@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_pi_from_a_path_and_from_bytes_import_alike(path: Path) -> None:
    # a path is streamed line by line, bytes are split in memory: the same draft either way
    (a,) = importing.prepare("pi", path)
    (b,) = importing.prepare("pi", path.read_bytes(), name=str(path))
    assert list(a.lines()) == list(b.lines())
    assert (a.entries, a.messages, a.leaf) == (b.entries, b.messages, b.leaf)


@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_import_prints_counts_equal_to_the_written_session(path: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    res = CliRunner().invoke(
        cli,
        ["--store", str(store_dir), "import", "pi", str(path), "--json"],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout.strip().splitlines()[-1])
    with tl.open_store(store_dir) as store:
        s = store.open(row["session_id"], read_only=True)
        assert row["entries"] == len(s.entry_ids())
        assert row["messages"] == s.message_count()
        assert row["context_messages"] == len(s.context().messages)


def test_the_content_hash_of_a_path_is_read_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 20_000  # 5 MB: several 1 MiB chunks
    f = tmp_path / "f.bin"
    f.write_bytes(data)
    assert importing.content_sha256(f) == hashlib.sha256(data).hexdigest()
    assert importing.content_sha256(data) == hashlib.sha256(data).hexdigest()


def test_duplicate_detection_reads_headers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REALDATA / "pi_session" / "badlogic_pi-mono__large-session.jsonl"
    store = tl.open_store(tmp_path / "s")
    (s,) = importing.import_path(store, "pi", path)
    s.close()

    def no_load(self: Any) -> Any:
        raise AssertionError("a session was loaded whole")

    monkeypatch.setattr(type(store.backend.open_log(s.id)), "load", no_load)
    assert importing.imported_from(store, importing.content_sha256(path)) == [s.id]
    assert importing.imported_from(store, "0" * 64) == []


# -- SQL backends: create_log consumes its lines in chunks ---------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_sql_create_in_chunks_stores_the_same_session(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REALDATA / "pi_session" / "badlogic_pi-mono__root-session.jsonl"
    whole = make_store(kind, tmp_path / "whole")
    (expected,) = importing.import_path(whole, "pi", path, session_id="s")
    module = store_sqlite if kind == "sqlite" else store_postgres
    monkeypatch.setattr(module, "CREATE_CHUNK", 7)  # 300-odd records: dozens of chunks
    parts = make_store(kind, tmp_path / "parts")
    (got,) = importing.import_path(parts, "pi", path, session_id="s")
    try:
        assert list(got.state.log.raw_lines()) == list(expected.state.log.raw_lines())
        assert parts.backend.summary("s") == whole.backend.summary("s")
        assert len(got.entry_ids()) == len(expected.entry_ids()) > 7 * 20
        got.append_message("user", "after the import")  # the sequence goes on after the chunks
        assert got.message_count() == expected.message_count() + 1
        assert parts.open("s").message_count() == expected.message_count() + 1
    finally:
        for st in (whole, parts):
            st.close()


# -- the catalog indexes a session in parts -------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_changes_since_in_parts_adds_up_to_the_whole(kind: str, tmp_path: Path) -> None:
    path = REALDATA / "pi_session" / "badlogic_pi-mono__before-compaction.jsonl"
    store = make_store(kind, tmp_path)
    importing.import_path(store, "pi", path, session_id="s")[0].close()
    backend = store.backend
    reset, whole, _ = backend.changes_since("s", "")
    assert reset and len(whole) > 1000
    ids, cursor, calls = [], "", 0
    while True:
        reset, slots, nxt = backend.changes_since("s", cursor, 64 * 1024)
        if nxt == cursor and not reset:
            break
        assert reset == (calls == 0)
        calls += 1
        ids.extend(s.id for s in slots)
        cursor = nxt
    assert ids == [s.id for s in whole]
    assert calls >= 2_000_000 // (64 * 1024)  # the 2.4 MB file took many parts


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_the_catalog_indexed_in_parts_equals_the_whole(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = REALDATA / "pi_session" / "badlogic_pi-mono__before-compaction.jsonl"

    def indexed(where: Path) -> list[tuple[Any, ...]]:
        store = make_store(kind, where)
        importing.import_path(store, "pi", path, session_id="s")[0].close()
        store.catalog.index()
        cat = store.catalog
        rows = cat.conn.execute(  # type: ignore[attr-defined]
            "SELECT session_id, entry_id, role, timestamp, body FROM cat_messages ORDER BY entry_id"
        ).fetchall()
        hits = [h.entry_id for h in cat.search("compaction summary", mode="keyword")]
        store.close()
        return [*rows, tuple(hits)]

    whole = indexed(tmp_path / "whole")
    calls: list[int | None] = []
    monkeypatch.setattr(catalog_sqlite, "SYNC_PART", 32 * 1024)
    backend_type = type(make_store(kind, tmp_path / "probe").backend)
    original = backend_type.changes_since

    def counted(self: Any, sid: str, cursor: str, limit: int | None = None) -> Any:
        calls.append(limit)
        return original(self, sid, cursor, limit)

    monkeypatch.setattr(
        type(make_store(kind, tmp_path / "probe2").backend), "changes_since", counted
    )
    parts = indexed(tmp_path / "parts")
    assert parts == whole
    assert len(whole) > 500
    assert len(calls) > 50 and set(calls) == {32 * 1024}


def test_a_version_1_source_read_once_numbers_its_entries_as_a_list_does() -> None:
    # v1 needs pi's entry numbering before converting (a compaction names an entry by index,
    # possibly a later one): an iterator is read into a list, a list or a path is read twice
    entries: list[Any] = [
        {"type": "session", "id": "v1", "timestamp": STAMP},
        {"type": "message", "timestamp": STAMP, "message": {"role": "user", "content": "a"}},
        b"{broken",  # a damaged line: kept, but skipped by pi's numbering
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 3, "tokensBefore": 9},
        {"type": "message", "timestamp": STAMP, "message": {"role": "user", "content": "b"}},
    ]
    (listed,) = pi.parse(entries, name="v1")
    (streamed,) = pi.parse(cast(Any, iter(entries)), name="v1")
    assert list(listed.lines()) == list(streamed.lines())
    compaction = json.loads(list(listed.lines())[2])
    assert compaction["type"] == "compaction"
    # the header is entry 0; the damaged line 3 has no number: entry 3, a later one, is line 5
    assert compaction["compaction"]["first_kept_entry_id"] == "L5"


@pytest.mark.parametrize("fmt", ["pi", "codex", "auto"])
def test_a_missing_file_or_a_folder_is_a_user_error_that_says_what_to_do(
    fmt: str, tmp_path: Path
) -> None:
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(tl.UserError, match=r"gone\.jsonl: no such file; check the path$"):
        importing.prepare(fmt, missing)
    with pytest.raises(tl.UserError, match=r"is a directory; pass the transcript file inside it$"):
        importing.prepare(fmt, tmp_path)
    with pytest.raises(tl.UserError, match=r"gone\.jsonl: no such file; check the path$"):
        importing.content_sha256(missing)
