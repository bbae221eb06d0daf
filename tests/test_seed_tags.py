"""The tag-system seed (000): `/tag` alone lists the tags, and the seed's "future enhancements"
built: tag renaming, tag export/import with a session, tag history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import threadline as tl
from threadline.cli.bookmarks import clock
from threadline.cli.main import cli
from threadline.errors import UserError


def _conversation(store: tl.store.BaseStore) -> tl.Session:
    s = store.create(session_id="work")
    for step in (
        "Step 1: Design database schema",
        "Step 2: Implement API endpoints",
        "Step 3: Add authentication",
    ):
        s.append_message("user", step)
        s.append_message("assistant", f"Done: {step[8:]}")
        s.tag(f"step{step[5]}")
    return s


def test_threadline_tag_without_a_name_lists_the_tags(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    s = _conversation(store)
    s.close()
    res = CliRunner().invoke(cli, ["--store", str(tmp_path), "tag", "work"])
    times = {t.name: clock(t.timestamp) for t in store.open("work").tags()}
    assert res.output.splitlines() == [
        "Current tags:",
        f"  [SPECIAL] __session_start__ → position    0 ({times['__session_start__']})",
        f"  step1                       → position    2 ({times['step1']})",
        f"  step2                       → position    4 ({times['step2']})",
        f"  step3                       → position    6 ({times['step3']})",
    ]
    anon = CliRunner().invoke(cli, ["--store", str(tmp_path), "tag", "work", "+", "3"])
    assert anon.output == "Tag 'tag_1' created at position 3\n"


def test_a_renamed_tag_keeps_its_message_and_position(store: tl.store.BaseStore) -> None:
    s = _conversation(store)
    t = s.rename_tag("step2", "api")
    assert (t.name, t.position, t.status) == ("api", 4, "valid")
    assert [x.name for x in s.tags()] == ["__session_start__", "step1", "api", "step3"]
    s.close()
    # durable, and the old name is free again
    again = store.open("work")
    assert again.tags().get("api").position == 4  # type: ignore[union-attr]
    assert again.tags().get("step2") is None
    with pytest.raises(UserError, match="Tag 'step3' already exists"):
        again.rename_tag("api", "step3")
    with pytest.raises(UserError, match="cannot be renamed"):
        again.rename_tag("__session_start__", "start")


def test_a_tags_history_lists_every_move(store: tl.store.BaseStore) -> None:
    s = _conversation(store)
    s.tag("step1", 1)  # moved
    s.rename_tag("step1", "schema")
    s.untag("schema")
    events = s.tag_history("schema")
    assert [(e.name, e.action, e.position, e.renamed_from) for e in events] == [
        ("step1", "set", 2, None),
        ("step1", "moved", 1, None),
        ("schema", "renamed", 1, "step1"),
        ("schema", "removed", 1, None),
    ]
    res = (
        CliRunner().invoke(cli, ["--store", store.url, "tag-history", "work", "schema"])
        if store.url.startswith("/")
        else None
    )
    if res is not None:
        assert res.output.splitlines() == [
            "History of tag 'schema':",
            f"  {clock(events[0].timestamp)}  'step1' set at position 2",
            f"  {clock(events[1].timestamp)}  'step1' moved to position 1",
            f"  {clock(events[2].timestamp)}  renamed from 'step1' to 'schema'",
            f"  {clock(events[3].timestamp)}  'schema' removed",
        ]


def test_tags_export_and_import_with_a_session(store: tl.store.BaseStore, tmp_path: Path) -> None:
    s = _conversation(store)
    s.tag("baseline", 0)
    exported = s.export_tags()
    assert [(r["name"], r["position"]) for r in exported["tags"]] == [  # type: ignore[union-attr]
        ("baseline", 0),
        ("step1", 2),
        ("step2", 4),
        ("step3", 6),
    ]
    # a copy of the session in another store (same entry ids) takes the tags back
    other = tl.open_store("memory://")
    copy = other.create(session_id="copy")
    copy.append_records([e for e in s.entries()])
    assert copy.tags().names() == ["__session_start__"]
    result = copy.import_tags(json.loads(json.dumps(exported)))
    assert result.imported == ["baseline", "step1", "step2", "step3"]
    assert [(t.name, t.position, t.status) for t in copy.tags()] == [
        ("__session_start__", 0, "valid"),
        ("baseline", 0, "valid"),
        ("step1", 2, "valid"),
        ("step2", 4, "valid"),
        ("step3", 6, "valid"),
    ]
    # a session without those entries: skipped with the reason, nothing written
    stranger = other.create(session_id="stranger")
    stranger.append_message("user", "unrelated")
    res = stranger.import_tags(exported)
    assert res.imported == ["baseline"]
    assert (
        res.skipped["step1"].startswith("entry '")
        and "is not in session 'stranger'" in res.skipped["step1"]
    )
    # a branched session carries the tags on its path
    branched = s.create_branched_session(s.path_ids()[3])
    assert [(t.name, t.status) for t in branched.tags() if t.status == "valid"] == [
        ("__session_start__", "valid"),
        ("baseline", "valid"),
        ("step1", "valid"),
        ("step2", "valid"),
    ]


def test_tag_export_and_import_on_the_command_line(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path / "a")
    s = _conversation(store)
    s.close()
    out = tmp_path / "tags.json"
    r = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "a"), "tag-export", "work", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "b"), "fork", str(tmp_path / "a" / "work.jsonl")]
    )
    forked = r.output.strip()
    target = tl.open_store(tmp_path / "b").open(forked)
    # the fork copied the tags already; importing again skips them and says why
    r = CliRunner().invoke(cli, ["--store", str(tmp_path / "b"), "tag-import", forked, str(out)])
    assert r.output.splitlines() == [
        "Imported 0 tag(s)",
        "Skipped 'step1': a tag with this name exists (pass replace=True to overwrite)",
        "Skipped 'step2': a tag with this name exists (pass replace=True to overwrite)",
        "Skipped 'step3': a tag with this name exists (pass replace=True to overwrite)",
    ]
    assert target.tags().names() == ["__session_start__", "step1", "step2", "step3"]
    r = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "b"), "tag-import", forked, str(out), "--replace"]
    )
    assert r.output == "Imported 3 tag(s): step1, step2, step3\n"
