"""Bookmarks and undo (DESIGN §7, issue 4): tags bound to entries, statuses, undo, clear."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

import threadline as tl
from threadline import bookmarks
from threadline.bookmarks import InvalidTagError, TagStatus, UndoResult
from threadline.cli.bookmarks import clock
from threadline.cli.main import cli
from threadline.model.content import content_hash, tool_result, tool_use


def talk(s: tl.Session, *questions: str) -> list[str]:
    """One user/assistant exchange per question; returns the new entry ids in order."""
    ids = []
    for q in questions:
        ids.append(s.append_message("user", q))
        ids.append(s.append_message("assistant", f"answer to {q}"))
    return ids


def view_ids(s: tl.Session) -> list[str]:
    return s.context().view.ids()


def names(listing: bookmarks.TagListing) -> list[tuple[str, int, str]]:
    return [(t.name, t.position, t.status) for t in listing]


# -- setting tags --------------------------------------------------------------------------------


def test_tag_defaults_to_the_end_and_binds_the_last_message_and_its_hash(store):
    s = store.create()
    ids = talk(s, "one", "two")
    t = s.tag("end")
    assert (t.name, t.position, t.status, t.entry_id) == ("end", 4, "valid", ids[3])
    assert t.hash == content_hash(s.entry(ids[3]).message)
    assert len(t.hash) == 16
    rec = s.state.bookmarks["end"]
    assert (rec.target_id, rec.position, rec.hash) == (ids[3], 4, t.hash)


def test_tag_at_the_end_follows_its_message_as_the_conversation_grows(store):
    s = store.create()
    talk(s, "one")
    s.tag("here")
    talk(s, "two", "three")
    assert s.tags().get("here") == TagStatus(
        name="here",
        position=2,
        status="valid",
        entry_id=s.state.bookmarks["here"].target_id,
        timestamp=s.state.bookmark_times["here"],
        hash=s.state.bookmarks["here"].hash,
    )


def test_tag_at_position_zero_binds_no_entry(store):
    s = store.create()
    talk(s, "one")
    t = s.tag("baseline", 0)
    assert (t.position, t.entry_id, t.hash) == (0, None, None)


@pytest.mark.parametrize("position", [-1, 5])
def test_a_position_outside_the_view_is_refused(store, position):
    s = store.create()
    talk(s, "one", "two")
    with pytest.raises(tl.UserError) as err:
        s.tag("x", position)
    assert str(err.value) == f"Invalid position {position} (0-4 allowed)"
    assert "x" not in s.state.bookmarks


def test_anonymous_tags_are_numbered_from_one(store):
    s = store.create()
    talk(s, "one")
    assert [s.tag().name, s.tag(None, 0).name, s.tag().name] == ["tag_1", "tag_2", "tag_3"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("has space", "Invalid tag name 'has space': use 1-64 letters, digits, '_', '.' or '-'"),
        ("x" * 65, f"Invalid tag name '{'x' * 65}': use 1-64 letters, digits, '_', '.' or '-'"),
        ("", "Invalid tag name '': use 1-64 letters, digits, '_', '.' or '-'"),
        (
            "__mine",
            "Tag name '__mine' is reserved (names starting with '__' are threadline's own); "
            "choose another name",
        ),
        (
            "__session_start__",
            "Tag name '__session_start__' is reserved (names starting with '__' "
            "are threadline's own); choose another name",
        ),
    ],
)
def test_tag_names_follow_the_rules(store, name, message):
    s = store.create()
    talk(s, "one")
    with pytest.raises(tl.UserError) as err:
        s.tag(name)
    assert str(err.value) == message


def test_names_with_dots_dashes_and_64_characters_are_accepted(store):
    s = store.create()
    talk(s, "one")
    assert s.tag("v1.2-rc_3").name == "v1.2-rc_3"
    assert s.tag("y" * 64).name == "y" * 64


def test_setting_an_existing_name_moves_it(store):
    s = store.create()
    talk(s, "one", "two")
    s.tag("mark", 2)
    s.tag("mark", 4)
    assert [(t.name, t.position) for t in s.tags()] == [("__session_start__", 0), ("mark", 4)]


def test_session_start_always_exists_at_zero_and_is_special(store):
    s = store.create()
    listing = s.tags()
    assert names(listing) == [("__session_start__", 0, "valid")]
    assert listing[0].special is True
    assert listing[0].timestamp == s.header.timestamp


def test_tags_are_sorted_by_position(store):
    s = store.create()
    talk(s, "one", "two", "three")
    s.tag("c", 6)
    s.tag("a", 2)
    s.tag("b", 4)
    s.tag("zero", 0)
    assert [t.name for t in s.tags()] == ["__session_start__", "zero", "a", "b", "c"]


def test_tags_persist_across_reopen(jsonl_store):
    s = jsonl_store.create()
    talk(s, "one", "two")
    s.tag("keep", 2)
    s.close()
    again = jsonl_store.open(s.id)
    assert names(again.tags()) == [("__session_start__", 0, "valid"), ("keep", 2, "valid")]


# -- statuses ------------------------------------------------------------------------------------


def compacted(store: tl.Store) -> tuple[tl.Session, list[str]]:
    """m0..m9 with tags at 3, 6 and 8, then a compaction keeping m6..m9: the view is
    [summary, m6, m7, m8, m9] (N = 5)."""
    s = store.create()
    ids = talk(s, "q0", "q1", "q2", "q3", "q4")
    s.tag("early", 3)
    s.tag("six", 6)
    s.tag("kept", 8)
    s.append_compaction("summary of q0-q2", ids[6], tokens_before=100)
    return s, ids


def test_a_tag_on_a_compacted_message_is_invalid_with_a_hash_mismatch(store):
    s, _ids = compacted(store)
    st = s.tags().get("early")
    assert (st.status, st.position, st.reason) == (
        "invalid",
        3,
        "Message at position 3 has changed (hash mismatch)",
    )


def test_a_compacted_tag_beyond_the_view_is_out_of_range(store):
    s, _ids = compacted(store)
    st = s.tags().get("six")
    assert (st.status, st.position, st.reason) == ("invalid", 6, "Position 6 out of range (0-5)")


def test_a_tag_in_the_kept_range_follows_its_message_after_compaction(store):
    s, ids = compacted(store)
    st = s.tags().get("kept")
    assert (st.status, st.position, st.entry_id) == ("valid", 3, ids[7])


def test_listing_removes_invalid_tags_once_and_says_which(store):
    s, _ids = compacted(store)
    first = s.tags()
    assert names(first) == [
        ("__session_start__", 0, "valid"),
        ("early", 3, "invalid"),
        ("kept", 3, "valid"),
        ("six", 6, "invalid"),
    ]
    assert (first.removed, first.removal_skipped) == (["early", "six"], False)
    second = s.tags()
    assert names(second) == [("__session_start__", 0, "valid"), ("kept", 3, "valid")]
    assert second.removed == []


def test_removal_of_invalid_tags_is_durable(jsonl_store):
    s, _ids = compacted(jsonl_store)
    s.tags()
    s.close()
    assert sorted(jsonl_store.open(s.id).state.bookmarks) == ["kept"]


def test_listing_only_reports_invalid_tags_while_another_writer_holds_the_lock(jsonl_store):
    writer, _ids = compacted(jsonl_store)  # holds the lock: it has written
    reader = jsonl_store.open(writer.id)
    listing = reader.tags()
    assert (listing.removed, listing.removal_skipped) == ([], True)
    assert [t.name for t in listing if t.status == "invalid"] == ["early", "six"]
    assert sorted(reader.state.bookmarks) == ["early", "kept", "six"]
    assert writer.tags().removed == ["early", "six"]


def test_a_read_only_session_only_reports_invalid_tags(jsonl_store):
    s, _ids = compacted(jsonl_store)
    s.close()
    ro = jsonl_store.open(s.id, read_only=True)
    listing = ro.tags()
    assert (listing.removed, listing.removal_skipped) == ([], True)


def test_a_tag_on_an_abandoned_branch_is_other_branch(store):
    s = store.create()
    ids = talk(s, "one", "two")
    s.tag("two")
    s.branch(ids[1])
    s.append_message("user", "another two")
    st = s.tags().get("two")
    assert (st.status, st.position, st.reason) == (
        "other_branch",
        4,
        f"Entry {ids[3]} is on another branch",
    )


# -- undo ----------------------------------------------------------------------------------------


def test_undo_one_steps_back_before_the_last_user_message(store):
    s = store.create()
    ids = talk(s, "one", "two")
    r = s.undo()
    assert r == UndoResult(user_messages_removed=1, messages_removed=2, leaf_id=ids[1])
    assert view_ids(s) == ids[:2]


def test_undo_counts_user_input_only_not_tool_results(store):
    s = store.create()
    q1 = s.append_message("user", "what time is it?")
    s.append_message("assistant", [tool_use("call_1", "get_time", {})])
    s.append_message("user", [tool_result("call_1", "12:00")])
    s.append_message("tool", [tool_result("call_1", "12:00")])
    s.append_message("assistant", "It is noon.")
    talk(s, "thanks")
    r = s.undo(2)
    assert (r.user_messages_removed, r.messages_removed, r.cleared) == (2, 7, True)
    assert s.leaf_id is None
    assert s.entry(q1).parent_id is None


def test_undo_by_count_across_tool_results_keeps_the_earlier_turns(store):
    s = store.create()
    first = talk(s, "hello")
    s.append_message("user", "what time is it?")
    s.append_message("assistant", [tool_use("call_1", "get_time", {})])
    s.append_message("user", [tool_result("call_1", "12:00")])
    s.append_message("assistant", "It is noon.")
    talk(s, "thanks")
    r = s.undo(2)
    assert (r.user_messages_removed, r.messages_removed) == (2, 6)
    assert view_ids(s) == first


def test_undo_more_than_there_is_clears_everything(store):
    s = store.create()
    talk(s, "one", "two", "three")
    s.tag("all_tags")
    r = s.undo(100)
    assert r == UndoResult(
        user_messages_removed=3,
        messages_removed=6,
        tags_left_behind=["all_tags"],
        cleared=True,
        leaf_id=None,
    )
    assert len(s.context().messages) == 0


def test_clearing_undo_sets_session_start_again(store):
    s = store.create()
    talk(s, "one")
    s.undo(5)
    assert s.state.bookmarks["__session_start__"].position == 0
    assert s.tags()[0].timestamp == s.state.bookmark_times["__session_start__"]


@pytest.mark.parametrize("n", [0, -1])
def test_undo_of_less_than_one_is_refused_and_writes_nothing(store, n):
    s = store.create()
    talk(s, "one")
    leaf = s.leaf_id
    with pytest.raises(tl.UserError) as err:
        s.undo(n)
    assert str(err.value) == f"Undo count must be a whole number of at least 1 (got {n})"
    assert s.leaf_id == leaf


def test_undo_reports_the_tags_it_leaves_behind(store):
    s = store.create()
    talk(s, "one")
    s.tag("kept")
    talk(s, "two")
    s.tag("recent_work")
    r = s.undo(1)
    assert r.tags_left_behind == ["recent_work"]
    assert [(t.name, t.status) for t in s.tags()] == [
        ("__session_start__", "valid"),
        ("kept", "valid"),
        ("recent_work", "other_branch"),
    ]


def test_undo_into_the_kept_range_of_a_compaction_returns_to_the_history_before_it(store):
    s = store.create()
    ids = talk(s, "q0", "q1", "q2", "q3", "q4")
    s.append_compaction("summary of q0-q2", ids[6], tokens_before=100)
    after = talk(s, "q5")
    assert len(s.context().messages) == 7  # summary, q3..q4 pairs, q5 pair
    r = s.undo(3)  # q5, q4, q3: q3 is the first kept message
    assert view_ids(s) == ids[:6]
    assert s.leaf_id == ids[5]
    assert (r.user_messages_removed, r.messages_removed, r.messages_added) == (3, 7, 6)
    assert s.has_entry(after[0])


def test_the_abandoned_part_stays_in_the_tree_and_branch_returns_to_it(store):
    s = store.create()
    ids = talk(s, "one", "two")
    s.undo(1)
    assert s.entry_ids() == ids
    s.branch(ids[3])
    assert view_ids(s) == ids


# -- undo to a tag -------------------------------------------------------------------------------


def test_tag_continue_and_undo_to_the_tag(store):
    s = store.create()
    ids = talk(s, "Implement authentication system")
    s.tag("stable")
    talk(s, "Try using OAuth2 instead", "Hmm")
    r = s.undo_to("stable")
    assert r == UndoResult(
        user_messages_removed=2, messages_removed=4, tag="stable", position=2, leaf_id=ids[1]
    )
    assert view_ids(s) == ids


def test_undo_to_the_second_of_three_steps_leaves_the_third_behind(store):
    s = store.create()
    talk(s, "Step 1: Design database schema")
    s.tag("step1")
    step2 = talk(s, "Step 2: Implement API endpoints")
    s.tag("step2")
    talk(s, "Step 3: Add authentication", "more on step 3", "and more")
    s.tag("step3")
    r = s.undo_to("step2")
    assert (r.messages_removed, r.tags_left_behind, r.position) == (6, ["step3"], 4)
    assert s.leaf_id == step2[1]
    assert s.tags().get("step3").status == "other_branch"


def test_undo_to_a_tag_on_another_branch_switches_branch(store):
    s = store.create()
    talk(s, "one")
    ids = talk(s, "two")
    s.tag("two")
    s.undo(1)
    alt = talk(s, "another two")
    r = s.undo_to("two")
    assert (r.switched_branch, r.messages_removed, r.messages_added) == (True, 2, 2)
    assert s.leaf_id == ids[1]
    assert s.has_entry(alt[0])


def test_tag_baseline_at_zero_then_undo_to_it_clears(store):
    s = store.create()
    talk(s, "one", "two")
    s.tag("baseline", 0)
    talk(s, "three")
    r = s.undo_to("baseline")
    assert (r.messages_removed, r.user_messages_removed, r.cleared, r.position) == (6, 3, True, 0)
    assert s.leaf_id is None


def test_undo_to_where_the_view_already_ends_says_so(store):
    s = store.create()
    talk(s, "one")
    s.tag("here")
    leaf = s.leaf_id
    r = s.undo_to("here")
    assert (r.already_there, r.messages_removed, r.position) == (True, 0, 2)
    assert s.leaf_id == leaf


def test_undo_to_an_invalid_tag_removes_it_and_does_not_move(store):
    s, _ids = compacted(store)
    leaf = s.leaf_id
    with pytest.raises(InvalidTagError) as err:
        s.undo_to("early")
    assert str(err.value) == "Tag 'early' is no longer valid (hash mismatch). Tag removed."
    assert s.leaf_id == leaf
    assert "early" not in s.state.bookmarks
    with pytest.raises(InvalidTagError) as err:
        s.undo_to("six")
    assert str(err.value) == (
        "Tag 'six' is no longer valid (Position 6 out of range (0-5)). Tag removed."
    )


def test_undo_to_an_unknown_tag_is_not_found(store):
    s = store.create()
    with pytest.raises(tl.NotFoundError) as err:
        s.undo_to("nope")
    assert str(err.value) == (
        f"Tag 'nope' not found in session '{s.id}'; list the session's tags to see their names"
    )


def test_undo_to_session_start_goes_back_to_the_beginning(store):
    s = store.create()
    talk(s, "one")
    r = s.undo_to("__session_start__")
    assert (r.cleared, r.messages_removed) == (True, 2)


# -- clear ---------------------------------------------------------------------------------------


def test_clear_resets_the_leaf_keeps_everything_and_restarts_session_start(store):
    s = store.create()
    ids = talk(s, "one", "two")
    s.tag("mark")
    r = s.clear()
    assert r == UndoResult(
        user_messages_removed=2,
        messages_removed=4,
        tags_left_behind=["mark"],
        cleared=True,
        leaf_id=None,
    )
    assert s.entry_ids() == ids
    listing = s.tags()
    assert names(listing) == [("__session_start__", 0, "valid"), ("mark", 4, "other_branch")]
    assert listing[0].timestamp == s.state.bookmark_times["__session_start__"]
    new = s.append_message("user", "fresh start")
    assert s.entry(new).parent_id is None


def test_results_encode_to_plain_json(store):
    s = store.create()
    talk(s, "one")
    t = s.tag("x")
    assert msgspec.to_builtins(s.undo(1))["tags_left_behind"] == ["x"]
    assert msgspec.to_builtins(t)["name"] == "x"
    assert set(msgspec.to_builtins(s.tags())) == {"tags", "removed", "removal_skipped"}


# -- context operations --------------------------------------------------------------------------


def ops_session(store: tl.Store) -> tl.Session:
    s = store.create()
    talk(s, "q0", "q1", "q2", "q3")
    s.tag("at2", 2)
    s.tag("at4", 4)
    s.tag("at6", 6)
    s.tag("end")
    return s


def test_a_snip_removing_the_tagged_message_invalidates_the_tag(store):
    s = ops_session(store)
    s.snip(2, 3)  # view: q0 a0 <snip marker> q2 a2 q3 a3 (N = 7)
    listing = s.tags()
    assert names(listing) == [
        ("__session_start__", 0, "valid"),
        ("at2", 2, "valid"),
        ("at4", 4, "invalid"),
        ("at6", 5, "valid"),
        ("end", 7, "valid"),
    ]
    assert listing.get("at4").reason == "Message at position 4 has changed (hash mismatch)"


def test_a_digest_removing_the_tagged_messages_invalidates_their_tags(store):
    s = ops_session(store)
    s.digest(0, 5, "the first three turns")  # view: digest q3 a3 (N = 3)
    listing = s.tags()
    assert [(t.name, t.status, t.reason) for t in listing if t.status == "invalid"] == [
        ("at2", "invalid", "Message at position 2 has changed (hash mismatch)"),
        ("at4", "invalid", "Position 4 out of range (0-3)"),
        ("at6", "invalid", "Position 6 out of range (0-3)"),
    ]
    assert listing.get("end").position == 3


def test_a_revise_replacing_the_tagged_message_invalidates_the_tag(store):
    s = ops_session(store)
    s.revise(1, 1, [tl.Message(role="assistant", content=[tl.text("a better answer")])])
    st = s.tags().get("at2")
    assert (st.status, st.reason) == (
        "invalid",
        "Message at position 2 has changed (hash mismatch)",
    )


# -- CLI -----------------------------------------------------------------------------------------


def run(store_dir: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["--store", str(store_dir), *args])
    return res.exit_code, res.output


def test_cli_tag_tags_undo_and_clear_print_the_documented_lines(tmp_path):
    store = tl.open_store(tmp_path)
    with store.create() as s:
        talk(s, "w1", "w2", "w3", "w4", "w5")
        sid = s.id
    assert run(tmp_path, "tag", sid, "experiment") == (
        0,
        "Tag 'experiment' created at position 10\n",
    )
    assert run(tmp_path, "tag", sid, "baseline", "0") == (
        0,
        "Tag 'baseline' created at position 0\n",
    )
    assert run(tmp_path, "tag", sid, "experiment", "4") == (
        0,
        "Tag 'experiment' moved to position 4\n",
    )
    assert run(tmp_path, "tag", sid, "x", "11") == (
        2,
        "Error: Invalid position 11 (0-10 allowed)\n",
    )
    s = store.open(sid, read_only=True)
    t_start = clock(s.header.timestamp)
    t_base = clock(s.state.bookmark_times["baseline"])
    t_exp = clock(s.state.bookmark_times["experiment"])
    assert run(tmp_path, "tags", sid) == (
        0,
        (
            "Current tags:\n"
            f"  [SPECIAL] __session_start__ → position    0 ({t_start})\n"
            f"  baseline                    → position    0 ({t_base})\n"
            f"  experiment                  → position    4 ({t_exp})\n"
        ),
    )
    assert run(tmp_path, "undo", sid, "2") == (
        0,
        "Removed last 2 user messages (4 total messages)\n",
    )
    assert run(tmp_path, "undo", sid, "--to", "experiment") == (
        0,
        "Restored to tag 'experiment' (removed 2 messages)\n",
    )
    assert run(tmp_path, "undo", sid, "experiment") == (
        0,
        "Already at tag 'experiment' (position 4)\n",
    )
    assert run(tmp_path, "undo", sid, "100") == (
        0,
        "Removed all 2 user messages (4 total messages)\nTags left behind: experiment\n",
    )
    assert run(tmp_path, "clear", sid) == (
        0,
        "Conversation cleared (removed 0 messages); the old messages stay in the tree\n",
    )
    code, out = run(tmp_path, "undo", sid, "0")
    assert (code, out) == (2, "Error: Undo count must be a whole number of at least 1 (got 0)\n")


def test_cli_tags_reports_and_removes_invalid_tags(tmp_path):
    store = tl.open_store(tmp_path)
    s, _ids = compacted(store)
    s.close()
    code, out = run(tmp_path, "tags", s.id)
    assert code == 0
    lines = out.splitlines()
    assert lines[2] == (
        "  early                       → position    3 INVALIDATED: Message at "
        "position 3 has changed (hash mismatch)"
    )
    assert lines[-3:] == [
        "  six                         → position    6 INVALIDATED: Position 6 out of range (0-5)",
        "",
        "Removed 2 invalid tag(s): early, six",
    ]
    code, out = run(tmp_path, "tags", s.id)
    assert "INVALIDATED" not in out and "Removed" not in out


def test_cli_tags_json_is_the_listing(tmp_path):
    store = tl.open_store(tmp_path)
    with store.create() as s:
        talk(s, "one")
        s.tag("t")
        sid = s.id
    code, out = run(tmp_path, "tags", sid, "--json")
    data = msgspec.json.decode(out)
    assert code == 0
    assert [(t["name"], t["position"], t["status"]) for t in data["tags"]] == [
        ("__session_start__", 0, "valid"),
        ("t", 2, "valid"),
    ]
    assert (data["removed"], data["removal_skipped"]) == ([], False)


def test_cli_tags_only_reports_invalid_tags_while_another_process_writes(tmp_path):
    store = tl.open_store(tmp_path)
    s, _ids = compacted(store)  # s keeps the writer lock
    code, out = run(tmp_path, "tags", s.id)
    assert (code, out.splitlines()[-1]) == (
        0,
        "Found 2 invalid tag(s): early, six (not removed: another process is writing this session)",
    )
    assert sorted(s.state.bookmarks) == ["early", "kept", "six"]


def test_untag_removes_a_tag_durably_and_refuses_the_reserved_and_unknown_ones(
    store: tl.Store,
) -> None:
    s = store.create()
    s.append_message("user", "hello")
    s.tag("keep")
    s.tag("drop", 0)
    s.untag("drop")
    assert [t.name for t in s.tags()] == ["__session_start__", "keep"]
    with pytest.raises(tl.UserError, match="'__session_start__' is threadline's own"):
        s.untag("__session_start__")
    with pytest.raises(tl.NotFoundError, match="Tag 'drop' not found"):
        s.untag("drop")
    s.close()
    assert [t.name for t in store.open(s.id).tags()] == ["__session_start__", "keep"]


def test_cli_untag_removes_the_tag_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    store = tl.open_store(tmp_path)
    with store.create() as s:
        s.append_message("user", "hello")
        s.tag("old")
        sid = s.id
    assert run(tmp_path, "untag", sid, "old") == (0, "Tag 'old' removed\n")
    code, out = run(tmp_path, "untag", sid, "old")
    assert (code, out) == (
        2,
        f"Error: Tag 'old' not found in session '{sid}'; run "
        f"'threadline tags {sid}' to list the tags\n",
    )
