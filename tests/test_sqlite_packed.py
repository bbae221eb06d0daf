"""The SQLite store's schema version 4: a row keeps its record packed (the JSON after the
envelope its columns hold, deflated with a preset dictionary), and every read gives back the
record's JSON byte for byte, whatever the row holds: packed, deflated whole, stripped only, or
the JSON itself (rows written before version 4, a purged record)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline.errors import StoreError
from threadline.model.entries import SessionHeader, encode, now
from threadline.store import migrations
from threadline.store.base import PURGED_MARK
from threadline.store.sqlite import envelope, envelope_json, pack, pack_rows, unpack

V1 = Path(__file__).resolve().parent / "data" / "sqlite_v1"
FILLER = "The committee reviews the quarterly figures and drafts a reply. "


def message(
    eid: str, parent: str | None, text: str, stamp: str = "2026-01-02T03:04:05.678Z"
) -> bytes:
    return msgspec.json.encode(
        {
            "type": "message",
            "id": eid,
            "parent_id": parent,
            "timestamp": stamp,
            "message": {"role": "user", "content": [{"type": "text", "text": {"content": text}}]},
        }
    )


# (line, how its row keeps it: the first byte of raw, or "json" for the JSON itself)
LINES: list[tuple[bytes, int | str]] = [
    (message("m1", None, "question one " + FILLER * 3), 1),
    # ids and a timestamp that msgspec escapes: rebuilt from the columns as written
    (message('m"2', "m1", "quote\u2028in the id " + FILLER, "2026-01-02T03:04:05\n"), 1),
    (message("m3-ünïcode", 'm"2', "ünïcode " + FILLER * 2), 1),
    # members in another order (an unknown writer's record): the whole JSON deflated
    (
        b'{"id":"m4","type":"message","parent_id":"m3-\xc3\xbcn\xc3\xafcode","timestamp":"t",'
        + b'"message":{"role":"assistant","content":[{"type":"text","text":{"content":"'
        + (FILLER * 3).encode()
        + b'"}}]}}',
        2,
    ),
    # a record too short to gain from deflating: stripped of its envelope only
    (b'{"type":"x","id":"m5","parent_id":"m4","timestamp":null,"q":1}', 3),
    # whitespace inside the envelope (not as encode writes it): the whole JSON deflated
    (b'{"type": "y", "id": "m6", "parent_id": "m5", "timestamp": null}', 2),
    # a purged record stays JSON: the lazy load finds it by its mark in raw
    (
        b'{"type":"message","id":"m7","parent_id":"m6","timestamp":"t","message":'
        + PURGED_MARK
        + b"}",
        "json",
    ),
    # longer than the 4 KB window: deflated with zlib's whole window
    (message("m8", "m7", "".join(f"line {i}: {FILLER}" for i in range(200))), 1),
]


def stored(db: Path, session_id: str) -> list[tuple[bytes, int | None]]:
    conn = sqlite3.connect(db)
    try:
        return [
            (bytes(r[0]), r[1])
            for r in conn.execute(
                "SELECT raw, json_bytes FROM tl_records WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]
    finally:
        conn.close()


def test_every_kind_of_row_reads_back_byte_for_byte(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    st = tl.open_store(f"sqlite://{db}")
    try:
        header = SessionHeader(id="packed", version=1, timestamp=now())
        log = st.backend.create_log(header, [line for line, _ in LINES])  # type: ignore[attr-defined]
        assert list(log.raw_lines()) == [line for line, _ in LINES]
        # the session's size is its JSON's, as a JSONL file of it would be
        assert log.size() == sum(len(line) + 1 for line, _ in LINES) + len(encode(header)) + 1
    finally:
        st.close()
    rows = stored(db, "packed")
    marks = [raw[0] if raw[:1] != b"{" else "json" for raw, _ in rows]
    assert marks == [kind for _, kind in LINES]
    for (line, kind), (raw, size) in zip(LINES, rows, strict=True):
        assert size == (None if kind == "json" else len(line))
        if kind == 1:  # the envelope is not kept and the rest is deflated
            assert len(raw) < len(line) - len(b'{"type":"message","id":"m1"')
    # a reopened store reads the same lines, and the session loads whole
    st = tl.open_store(f"sqlite://{db}")
    try:
        assert list(st.backend.open_log("packed").raw_lines()) == [line for line, _ in LINES]  # type: ignore[attr-defined]
        s = st.open("packed", read_only=True)
        assert s.load_report.clean
        assert [m.message.text for m in s.path() if m.type == "message" and m.id != "m7"] == [
            msgspec.json.decode(line)["message"]["content"][0]["text"]["content"]
            for line, _ in LINES
            if b'"content":"' in line
        ]
    finally:
        st.close()


_TEXT = st.text(max_size=40)
_ID = st.one_of(st.none(), _TEXT)


@settings(max_examples=300, deadline=None)
@given(
    kind=_TEXT,
    eid=_ID,
    parent=_ID,
    stamp=_ID,
    body=st.dictionaries(_TEXT, st.one_of(_TEXT, st.integers(), st.none()), max_size=5),
    reorder=st.booleans(),
)
def test_any_record_reads_back_from_its_row(
    kind: str,
    eid: str | None,
    parent: str | None,
    stamp: str | None,
    body: dict[str, object],
    reorder: bool,
) -> None:
    """Whatever the envelope holds (escapes, Unicode, nulls) and whatever follows it, the row
    :func:`pack` makes reads back as the line, from the columns :func:`envelope` gives."""
    head = {"type": kind, "id": eid, "parent_id": parent, "timestamp": stamp}
    rest = {k: v for k, v in body.items() if k not in head}
    record = {**rest, **head} if reorder else {**head, **rest}
    line = msgspec.json.encode(record)
    env = envelope(line)
    raw, size = pack(line, env)
    assert unpack(raw, env[0], env[1], env[2], env[3]) == line
    assert size == (None if raw == line else len(line))


def test_pack_and_unpack_agree_on_the_envelope_columns() -> None:
    line = message("a", None, FILLER)
    env = ("a", None, "message", "2026-01-02T03:04:05.678Z")
    raw, size = pack(line, env)
    assert raw[0] == 1 and size == len(line)
    assert (
        envelope_json("message", "a", None, "2026-01-02T03:04:05.678Z")
        == line[: line.index(b'"message":{')]
    )
    assert unpack(raw, "a", None, "message", "2026-01-02T03:04:05.678Z") == line
    # rebuilt from other columns, the envelope would differ: it is the columns that it comes from
    assert unpack(raw, "b", None, "message", "2026-01-02T03:04:05.678Z") != line


def test_a_damaged_packed_row_is_reported_and_the_rest_of_the_session_loads(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    st = tl.open_store(f"sqlite://{db}")
    with st.create() as s:
        ids = [s.append_message("user", f"message {i} {FILLER}") for i in range(4)]
    st.close()
    conn = sqlite3.connect(db)
    [(raw,)] = conn.execute("SELECT raw FROM tl_records WHERE id = ?", (ids[2],)).fetchall()
    assert raw[0] == 1
    conn.execute(
        "UPDATE tl_records SET raw = ? WHERE id = ?", (raw[:1] + b"\xff" * (len(raw) - 1), ids[2])
    )
    conn.commit()
    conn.close()
    st = tl.open_store(f"sqlite://{db}")
    try:
        again = st.open(s.id, read_only=True)
        assert [line for line, _ in again.load_report.corrupt_lines] == [4]  # header is line 1
        assert [e.id for e in again.entries() if e.type == "message"] == [ids[0], ids[1], ids[3]]
    finally:
        st.close()


def test_rows_of_an_older_version_stay_json_and_new_rows_beside_them_are_packed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    shutil.copy(V1 / "store.db", db)
    st = tl.open_store(f"sqlite://{db}")
    try:
        sid = max(st.list(), key=lambda row: len(stored(db, row.id))).id
        before = stored(db, sid)
        assert before and all(raw[:1] == b"{" and size is None for raw, size in before)
        with st.open(sid) as s:
            old = [e.id for e in s.entries()]
            new = s.append_message("assistant", "written by version 4 " + FILLER)
        after = stored(db, sid)
        assert after[: len(before)] == before
        [(raw, size)] = after[len(before) :]
        assert raw[0] == 1 and size is not None
        again = st.open(sid, read_only=True)
        assert [e.id for e in again.entries()] == [*old, new]
        assert again.entry(new).message.text == "written by version 4 " + FILLER
    finally:
        st.close()


def test_a_database_of_a_newer_threadline_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    tl.open_store(f"sqlite://{db}").close()
    newer = migrations.latest("sqlite") + 1
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO tl_schema_migrations VALUES ('sqlite', ?, 'later')", (newer,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as info:
        tl.open_store(f"sqlite://{db}")
    assert str(info.value) == (
        f"The SQLite store {db} is at schema version {newer}, written by a newer threadline "
        f"(this one reads versions up to {newer - 1}); upgrade threadline to open it"
    )
    # nor does db pack touch its rows
    with pytest.raises(StoreError) as packing:
        pack_rows(str(db))
    assert str(packing.value) == str(info.value)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT max(version) FROM tl_schema_migrations").fetchone() == (newer,)
    conn.close()


def test_pack_false_writes_the_json_and_either_store_reads_the_others_rows(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    plain = tl.open_store(f"sqlite://{db}", pack=False)
    with plain.create() as s:
        first = s.append_message("user", "written as JSON " + FILLER)
    plain.close()
    packed = tl.open_store(f"sqlite://{db}")
    with packed.open(s.id) as again:
        second = again.append_message("assistant", "written packed " + FILLER)
    packed.close()
    rows = stored(db, s.id)
    assert [raw[:1] == b"{" for raw, _ in rows] == [True, False]
    assert rows[0][1] is None and rows[1][1] is not None and rows[1][1] > len(rows[1][0])
    plain = tl.open_store(f"sqlite://{db}", pack=False)
    try:
        read = plain.open(s.id, read_only=True)
        assert [(e.id, e.message.text) for e in read.entries()] == [
            (first, "written as JSON " + FILLER),
            (second, "written packed " + FILLER),
        ]
    finally:
        plain.close()


def lines_by_session(db: Path) -> dict[str, list[bytes]]:
    """Every session's lines, read through a store opened on ``db``."""
    st = tl.open_store(f"sqlite://{db}")
    try:
        return {
            row.id: list(st.backend.open_log(row.id).raw_lines())  # type: ignore[attr-defined]
            for row in st.list()
        }
    finally:
        st.close()


def test_db_pack_packs_older_rows_in_place_and_they_read_back_exactly(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    db = tmp_path / "store.db"
    shutil.copy(V1 / "store.db", db)
    expected = lines_by_session(db)  # the store upgrades to version 4: the rows stay JSON
    json_rows = [r for sid in expected for r in stored(db, sid)]
    purged = [raw for raw, _ in json_rows if PURGED_MARK in raw]
    assert purged and all(raw[:1] == b"{" and size is None for raw, size in json_rows)
    size_before = db.stat().st_size
    runner = CliRunner()
    first = runner.invoke(cli, ["db", "pack", f"sqlite://{db}"])
    rows = [r for sid in expected for r in stored(db, sid)]
    packed = [(raw, size) for raw, size in rows if raw[:1] != b"{"]
    # every row but the purged one is packed; the counts are what the command says
    assert [raw for raw, _ in rows if raw[:1] == b"{"] == purged
    assert len(packed) == len(json_rows) - len(purged)
    before = sum(size for _, size in packed if size is not None)
    after = sum(len(raw) for raw, _ in packed)
    assert (first.exit_code, first.output) == (
        0,
        f"Packed {len(packed):,} records: {before:,} bytes of JSON now take {after:,}.\n",
    )
    assert after < before and db.stat().st_size < size_before  # VACUUM gave the pages back
    assert lines_by_session(db) == expected
    again = runner.invoke(cli, ["db", "pack", f"sqlite://{db}"])
    assert (again.exit_code, again.output) == (
        0,
        "Every record is packed already; nothing to do.\n",
    )
    wrong = runner.invoke(cli, ["db", "pack", str(tmp_path)])
    assert wrong.exit_code == 2 and f"db pack takes a sqlite:/// URL, not '{tmp_path}'" in (
        wrong.output
    )
