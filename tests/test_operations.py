"""Context operations (DESIGN §6): each op, composition, conditions, toggling, refusals, growth."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from conftest import REALDATA
from threadline import formats
from threadline.errors import NotFoundError, UserError
from threadline.model.content import text, tool_result, tool_use


def texts(s: tl.Session, active_tags: list[str] | None = None) -> list[str]:
    """The view's texts; a marker shows as ``<expand>``, ``<collapse>`` or ``<snip>``."""
    ctx = s.context(active_tags=active_tags)
    return [
        f"<{v.id.rpartition(':')[2]}>" if v.kind == "marker" else m.text
        for m, v in zip(ctx.messages, ctx.view, strict=True)
    ]


@pytest.fixture
def s(store: tl.Store) -> tl.Session:
    """A session whose view is m0 (user), m1 (assistant), …, m7 (assistant)."""
    sess = store.create()
    for i in range(8):
        sess.append_message("user" if i % 2 == 0 else "assistant", f"m{i}")
    return sess


def test_digest_replaces_the_inclusive_range_with_one_system_message(s: tl.Session) -> None:
    op = s.digest(2, 5, "talked about auth")
    ctx = s.context()
    assert texts(s) == ["m0", "m1", "talked about auth", "m6", "m7"]
    assert ctx.messages[2].role == "system"
    assert ctx.view[2].id == f"{op}:0"
    assert ctx.view[2].kind == "synthetic"
    assert ctx.view[2].entry_id == op


def test_revise_replaces_the_range_with_the_given_messages(s: tl.Session) -> None:
    op = s.revise(
        1, 3, [{"role": "assistant", "content": "r1"}, {"role": "user", "content": [text("r2")]}]
    )
    assert texts(s) == ["m0", "<expand>", "r1", "r2", "<collapse>", "m4", "m5", "m6", "m7"]
    assert [v.id for v in s.context().view[1:5]] == [
        f"{op}:expand",
        f"{op}:0",
        f"{op}:1",
        f"{op}:collapse",
    ]


def test_snip_removes_the_range_and_stays_listed(s: tl.Session) -> None:
    op = s.snip(0, 1)
    assert texts(s) == ["<snip>", "m2", "m3", "m4", "m5", "m6", "m7"]
    [info] = s.operations()
    assert (info.id, info.kind, info.state, info.standing) == (op, "snip", "active", "applied")


def test_resequence_reorders_a_contiguous_range(s: tl.Session) -> None:
    s.resequence([4, 5, 2, 3])
    assert texts(s) == ["m0", "m1", "m4", "m5", "m2", "m3", "m6", "m7"]


def test_insert_adds_messages_after_a_position_or_at_the_front(s: tl.Session) -> None:
    s.insert(1, [{"role": "user", "content": "note"}])
    s.insert(-1, [{"role": "system", "content": "front"}])
    assert texts(s) == ["front", "m0", "m1", "note", "m2", "m3", "m4", "m5", "m6", "m7"]


def test_tag_messages_shows_tags_in_the_view_and_can_remove_them(s: tl.Session) -> None:
    assert s.tag_messages(1, 2, ["db", "auth"]) == 2
    assert [v.tags for v in s.context().view[:4]] == [[], ["db", "auth"], ["db", "auth"], []]
    assert s.tag_messages(2, 2, ["db"], remove=True) == 1
    assert [v.tags for v in s.context().view[1:3]] == [["db", "auth"], ["auth"]]
    assert s.operations() == []  # tagging is not an op


def test_an_op_over_a_digest_targets_the_synthetic_message(s: tl.Session) -> None:
    s.digest(1, 3, "sum")
    assert texts(s) == ["m0", "sum", "m4", "m5", "m6", "m7"]
    s.digest(1, 2, "sum of sum")
    assert texts(s) == ["m0", "sum of sum", "m5", "m6", "m7"]


def test_an_insert_after_a_resequence_follows_the_moved_message(s: tl.Session) -> None:
    s.resequence([1, 0])
    s.insert(0, [{"role": "user", "content": "after m1"}])
    assert texts(s) == ["m1", "after m1", "m0", "m2", "m3", "m4", "m5", "m6", "m7"]


def test_a_conditional_op_applies_only_when_one_of_its_tags_is_active(s: tl.Session) -> None:
    s.snip(0, 5, tags=["short", "lean"])
    full = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"]
    assert texts(s) == full
    assert texts(s, ["other"]) == full
    assert texts(s, ["lean"]) == ["<snip>", "m6", "m7"]
    [info] = s.operations()
    assert (info.standing, info.reason) == (
        "not_applied",
        "conditional on tags short, lean; none is active",
    )
    [info] = s.operations(active_tags=["short"])
    assert info.standing == "applied"


def test_positions_refer_to_the_view_with_the_same_active_tags(s: tl.Session) -> None:
    s.snip(0, 3, tags=["lean"])
    s.digest(1, 2, "first two of the lean view", active_tags=["lean"])  # 0 is the marker
    assert texts(s, ["lean"]) == ["<snip>", "first two of the lean view", "m6", "m7"]
    # without the tag the snip is off, so the digest's entries m4-m5 are still in the view
    assert texts(s) == ["m0", "m1", "m2", "m3", "first two of the lean view", "m6", "m7"]


def test_revert_and_toggle_return_the_view_exactly(s: tl.Session) -> None:
    before = [(v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)]
    op = s.digest(2, 4, "sum")
    after = [(v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)]
    info = s.revert(op)
    assert (info.state, info.standing, info.reason) == (
        "reverted",
        "not_applied",
        "the operation is reverted",
    )
    assert [
        (v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)
    ] == before
    assert s.toggle(op, True).state == "active"
    assert [(v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)] == after
    assert s.toggle(op, False).state == "inactive"
    assert [
        (v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)
    ] == before


def test_op_state_survives_a_reopen(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "a")
    s.append_message("assistant", "b")
    op = s.snip(0, 0)
    s.toggle(op, False)
    s.close()
    again = store.open(s.id)
    assert texts(again) == ["a", "b"]
    assert [(i.id, i.state) for i in again.operations()] == [(op, "inactive")]


def test_active_only_lists_only_active_ops(s: tl.Session) -> None:
    a = s.snip(0, 0)
    b = s.snip(0, 0)
    s.revert(a)
    assert [i.id for i in s.operations(active_only=True)] == [b]
    assert [(i.id, i.state) for i in s.operations()] == [(a, "reverted"), (b, "active")]


def test_positions_stay_right_as_the_conversation_grows(s: tl.Session) -> None:
    s.digest(0, 3, "start")
    s.insert(4, [{"role": "user", "content": "note"}])  # after m7
    s.append_message("user", "m8")
    s.append_message("assistant", "m9")
    grown = ["start", "m4", "m5", "m6", "m7", "note", "m8", "m9"]
    assert texts(s) == grown
    s.snip(6, 6)  # m8 by its position in the grown view
    assert texts(s) == ["start", "m4", "m5", "m6", "m7", "note", "<snip>", "m9"]
    s.append_message("user", "m10")
    assert texts(s) == ["start", "m4", "m5", "m6", "m7", "note", "<snip>", "m9", "m10"]
    # the incrementally extended view equals a rebuild from the file
    s.close()
    assert texts(tl.Store(s.store).open(s.id)) == texts(s)  # type: ignore[arg-type]


def test_an_op_whose_entries_were_compacted_away_is_inapplicable(s: tl.Session) -> None:
    path = [e.id for e in s.path()]
    op = s.digest(1, 2, "early")
    s.append_compaction("summary", first_kept_entry_id=path[5])
    assert texts(s) == ["summary", "m5", "m6", "m7"]
    [info] = s.operations()
    assert (info.id, info.standing) == (op, "inapplicable")
    assert info.reason == f"entry '{path[1]}' is no longer in the view"


def test_an_op_is_not_on_another_branch(s: tl.Session) -> None:
    path = [e.id for e in s.path()]
    op = s.snip(0, 1)
    s.branch(path[3])
    assert texts(s) == ["m0", "m1", "m2", "m3"]
    [info] = s.operations()
    assert (info.id, info.standing) == (op, "not_on_branch")
    s.branch(op)
    assert texts(s) == ["<snip>", "m2", "m3", "m4", "m5", "m6", "m7"]


def test_an_op_on_a_synthetic_message_becomes_inapplicable_when_its_source_is_off(
    s: tl.Session,
) -> None:
    d = s.digest(0, 1, "sum")
    r = s.resequence([1, 0])  # m2 before "sum"
    assert texts(s)[:2] == ["m2", "sum"]
    s.revert(d)
    assert texts(s)[:3] == ["m0", "m1", "m2"]
    standing = {i.id: i.standing for i in s.operations()}
    assert standing == {d: "not_applied", r: "inapplicable"}


def test_toggle_and_revert_of_an_unknown_op_are_refused(s: tl.Session) -> None:
    with pytest.raises(NotFoundError, match="Operation 'nope' not found in session"):
        s.toggle("nope", True)
    msg_id = s.path()[0].id
    with pytest.raises(NotFoundError):
        s.revert(msg_id)  # a message is not an op


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda s: s.digest(3, 9, "x"),
            "digest of positions 3-9: positions 3-9 are out of range (0-7)",
        ),
        (lambda s: s.snip(-1, 2), "snip of positions -1-2: positions -1-2 are out of range (0-7)"),
        (lambda s: s.snip(4, 2), "snip of positions 4-2: start 4 is after end 2"),
        (
            lambda s: s.insert(8, [{"role": "user", "content": "x"}]),
            "insert after position 8: out of range (-1-7)",
        ),
        (lambda s: s.resequence([2, 4]), "must list every position from 2 to 4 exactly once"),
        (lambda s: s.resequence([8, 7]), "positions 7-8 are out of range (0-7)"),
        (lambda s: s.resequence([1, 2]), "the order is unchanged"),
        (lambda s: s.digest(1, 2, "  "), "the summary is empty"),
        (lambda s: s.revise(1, 2, [{"role": "robot", "content": "x"}]), "Unknown role 'robot'"),
        (lambda s: s.revise(1, 2, [{"content": "x"}]), "needs a 'role' and a 'content'"),
        (lambda s: s.tag_messages(0, 1, []), "give at least one tag"),
        (lambda s: s.insert(0, []), "give at least one message"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(
    s: tl.Session, call: object, message: str
) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        call(s)  # type: ignore[operator]
    assert s.operations() == []


@pytest.fixture
def tools(store: tl.Store) -> tl.Session:
    """user, assistant calling c1, tool result c1, assistant, user."""
    s = store.create()
    s.append_message("user", "list files")
    s.append_message("assistant", [text("looking"), tool_use("c1", "ls", {})])
    s.append_message("tool", [tool_result("c1", "a.txt")])
    s.append_message("assistant", "there is a.txt")
    s.append_message("user", "thanks")
    return s


def test_a_range_that_splits_a_tool_pair_is_refused(tools: tl.Session) -> None:
    with pytest.raises(
        UserError,
        match=r"Refused: digest of positions 0-1 would leave the "
        r"tool_result for call 'c1' \(position 2\) without its tool_use",
    ):
        tools.digest(0, 1, "x")
    with pytest.raises(
        UserError,
        match=r"snip of positions 2-3 would leave the tool_use 'c1' "
        r"\(position 1\) without its tool_result",
    ):
        tools.snip(2, 3)
    assert tools.operations() == []


def test_a_range_holding_the_whole_pair_is_accepted(tools: tl.Session) -> None:
    tools.digest(1, 3, "listed files: a.txt")
    assert texts(tools) == ["list files", "listed files: a.txt", "thanks"]


def test_an_insert_between_a_call_and_its_result_is_refused(tools: tl.Session) -> None:
    with pytest.raises(
        UserError,
        match=r"would separate the tool_use 'c1' \(position 1\) from "
        r"its tool_result \(position 2\)",
    ):
        tools.insert(1, [{"role": "user", "content": "wedge"}])


def test_a_resequence_that_puts_the_result_first_is_refused(tools: tl.Session) -> None:
    with pytest.raises(UserError, match="would leave the tool_result for call 'c1'"):
        tools.resequence([2, 1])


def test_a_revise_may_not_introduce_an_orphan_result(tools: tl.Session) -> None:
    with pytest.raises(UserError, match=r"tool_result for call 'zz' \(new message 0\)"):
        tools.revise(
            4,
            4,
            [
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_result": {"tool_use_id": "zz", "content": "?"},
                        }
                    ],
                }
            ],
        )


def test_a_pending_call_at_the_end_is_not_a_problem(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "go")
    s.append_message("assistant", "ok")
    s.append_message("assistant", [tool_use("c9", "run", {})])
    s.snip(1, 1)
    assert texts(s) == ["go", "<snip>", ""]


def test_the_op_record_stores_entry_ids_in_the_file_format(s: tl.Session) -> None:
    ids = [v.id for v in s.context().view]
    op = s.resequence([3, 2])
    assert msgspec.to_builtins(s.entry(op))["context_op"] == {
        "kind": "resequence",
        "order": [ids[3], ids[2]],
    }


def test_ops_on_a_read_only_session_are_refused(store: tl.Store) -> None:
    s = store.create()
    s.append_message("user", "a")
    s.close()
    ro = store.open(s.id, read_only=True)
    with pytest.raises(UserError, match="read-only"):
        ro.snip(0, 0)


def test_ops_on_a_real_pi_session_respect_its_tool_calls(store: tl.Store) -> None:
    msgs = formats.get("pi").load(REALDATA / "pi_session" / "badlogic_pi-mono__large-session.jsonl")
    s = store.create()
    for m in msgs:
        s.append_message(m)
    view = list(s.context().messages)
    assert len(view) == 914
    call = next(i for i, m in enumerate(view) if len(m.tool_uses) > 1)
    wanted = {u.id for u in view[call].tool_uses}
    last = max(j for j, m in enumerate(view) if wanted & {r.tool_use_id for r in m.tool_results})
    assert last > call + 1
    with pytest.raises(
        UserError,
        match=rf"would leave the tool_result for call '\S+' "
        rf"\(position {call + 1}\) without its tool_use",
    ):
        s.snip(call, call)
    with pytest.raises(UserError, match="would leave the tool_result"):
        s.digest(call, last - 1, "part of a turn")
    before = [(v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)]
    op = s.digest(call, last, "ran the tools")
    after = list(s.context().messages)
    assert len(after) == 914 - (last - call)
    assert after[call].text == "ran the tools"
    assert after[call + 1] == view[last + 1]
    s.revert(op)
    assert [
        (v.id, m) for v, m in zip(s.context().view, s.context().messages, strict=True)
    ] == before


def test_the_ops_commands_print_ids_rows_and_one_line_errors(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from threadline.cli.main import cli

    store = tl.open_store(str(tmp_path))
    with store.create() as s:
        for i in range(4):
            s.append_message("user" if i % 2 == 0 else "assistant", f"m{i}")
        sid = s.id
    runner = CliRunner()
    base = ["--store", str(tmp_path), "ops"]
    made = runner.invoke(cli, [*base, "digest", sid, "0", "1", "first two", "--if-tags", "lean"])
    assert made.exit_code == 0
    op = made.output.strip()
    listed = runner.invoke(cli, [*base, "list", sid])
    assert listed.output == (
        f"{op}  digest     active   not_applied (conditional on tags lean; "
        "none is active) if lean\n"
    )
    listed = runner.invoke(cli, [*base, "list", sid, "--active-tags", "lean", "--json"])
    assert [(r["id"], r["standing"]) for r in msgspec.json.decode(listed.output)] == [
        (op, "applied")
    ]
    reverted = runner.invoke(cli, [*base, "revert", sid, op])
    assert reverted.output == f"{op} reverted not_applied\n"
    tagged = runner.invoke(cli, [*base, "tag", sid, "1", "2", "db"])
    assert tagged.output == "Tagged 2 messages\n"
    bad = runner.invoke(cli, [*base, "snip", sid, "3", "7"])
    assert bad.exit_code == 2
    assert bad.output == (
        "Error: snip of positions 3-7: positions 3-7 are out of range (0-3); "
        "list the context to see the current positions\n"
    )
    bad = runner.invoke(cli, [*base, "insert", sid, "0", "not json"])
    assert bad.exit_code == 2
    assert bad.output.startswith("Error: MESSAGES_JSON is not valid JSON")


@st.composite
def op_scripts(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Steps: ("append", 0, 0), or an op kind with two position seeds."""
    kinds = st.sampled_from(["append", "digest", "revise", "snip", "resequence", "insert"])
    return draw(
        st.lists(
            st.tuples(kinds, st.integers(0, 10_000), st.integers(0, 10_000)),
            min_size=1,
            max_size=14,
        )
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=op_scripts())
def test_ops_match_a_list_model_and_switching_all_off_restores_the_history(
    script: list[tuple[str, int, int]],
) -> None:
    s = tl.open_store("memory://").create()
    model: list[str] = []
    appended: list[str] = []
    ops: list[str] = []
    for n in range(4):
        s.append_message("user", f"m{n}")
        model.append(f"m{n}")
        appended.append(f"m{n}")
    for step, (kind, a, b) in enumerate(script):
        size = len(model)
        if kind == "append" or size == 0:
            s.append_message("user", f"m{len(appended)}")
            model.append(f"m{len(appended)}")
            appended.append(f"m{len(appended)}")
        elif kind == "insert":
            after = a % (size + 1) - 1
            ops.append(s.insert(after, [{"role": "user", "content": f"ins{step}"}]))
            model.insert(after + 1, f"ins{step}")
        else:
            start, end = sorted((a % size, b % size))
            if kind == "digest":
                ops.append(s.digest(start, end, f"dig{step}"))
                model[start : end + 1] = [f"dig{step}"]
            elif kind == "revise":
                ops.append(
                    s.revise(
                        start,
                        end,
                        [
                            {"role": "user", "content": f"rev{step}a"},
                            {"role": "user", "content": f"rev{step}b"},
                        ],
                    )
                )
                model[start : end + 1] = ["<expand>", f"rev{step}a", f"rev{step}b", "<collapse>"]
            elif kind == "snip":
                ops.append(s.snip(start, end))
                model[start : end + 1] = ["<snip>"]
            elif end > start:
                order = list(range(start, end + 1))[::-1]
                ops.append(s.resequence(order))
                model[start : end + 1] = model[start : end + 1][::-1]
        assert texts(s) == model
    for op in ops:
        s.toggle(op, False)
    assert texts(s) == appended
    for op in ops:
        s.toggle(op, True)
    assert texts(s) == model
