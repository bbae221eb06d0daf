"""Compaction: cut points, token accounting, file tracking, chained compactions, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline import formats
from threadline.compaction import (
    CutPoint,
    ExtractiveSummarizer,
    FileOps,
    compact,
    file_ops,
    find_cut_point,
    is_cut_point,
    prepare_compaction,
    should_compact,
)
from threadline.errors import UserError
from threadline.model.content import Message, Usage, text, tool_result, tool_use
from threadline.tokens import IMAGE_TOKENS, context_tokens, estimate_message


def _table_session() -> tl.Session:
    """[user, assistant+tool call, tool, user, assistant+tool call, tool, assistant]."""
    s = tl.open_store("memory://").create()
    s.append_message("user", "u0")
    s.append_message("assistant", [tool_use("c1", "read", {"path": "a.py"})])
    s.append_message("tool", [tool_result("c1", "body")])
    s.append_message("user", "u3")
    s.append_message("assistant", [tool_use("c2", "bash", {"command": "ls"})])
    s.append_message("tool", [tool_result("c2", "out")])
    s.append_message("assistant", "done")
    return s


def _hundred(_entry: Any) -> int:
    return 100


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        (1, CutPoint(first_kept_index=6, turn_start_index=3, is_split_turn=True)),
        (150, CutPoint(first_kept_index=6, turn_start_index=3, is_split_turn=True)),
        (250, CutPoint(first_kept_index=6, turn_start_index=3, is_split_turn=True)),
        (350, CutPoint(first_kept_index=3, turn_start_index=-1, is_split_turn=False)),
        (10_000, CutPoint(first_kept_index=0, turn_start_index=-1, is_split_turn=False)),
    ],
)
def test_cut_point_table(keep: int, expected: CutPoint) -> None:
    entries = _table_session().path()
    assert find_cut_point(entries, keep, _hundred) == expected


def test_cut_never_lands_on_a_tool_result_or_a_tool_calling_assistant() -> None:
    entries = _table_session().path()
    cuts = {find_cut_point(entries, keep, _hundred).first_kept_index for keep in range(0, 800)}
    assert cuts == {0, 3, 6}
    assert [is_cut_point(e) for e in entries] == [True, False, False, True, False, False, True]


def test_cut_moves_onto_non_message_entries_just_before_it() -> None:
    s = tl.open_store("memory://").create()
    s.append_message("user", "u0")
    s.append_message("assistant", "a1")
    s.append_model_change("openai", "gpt-x")
    s.append_thinking_level("high")
    s.append_message("user", "u4")
    s.append_message("assistant", "a5")
    entries = s.path()
    cut = find_cut_point(entries, 200, lambda e: 100 if e.type == "message" else 0)
    assert cut == CutPoint(first_kept_index=2, turn_start_index=-1, is_split_turn=False)


def test_context_tokens_use_the_last_reported_usage_plus_an_estimate_after_it() -> None:
    msgs = [
        Message(role="user", content=[text("x" * 400)]),
        Message(role="assistant", content=[text("ok")], usage=Usage(input=900, output=100)),
        Message(role="user", content=[text("y" * 40)]),
    ]
    got = context_tokens(msgs)
    assert (got.usage_tokens, got.estimated_tokens, got.usage_index) == (1000, 14, 1)
    assert got.tokens == 1014


def test_usage_from_before_a_compaction_summary_is_not_trusted() -> None:
    msgs = [
        Message(role="compactionSummary", content=[text("s" * 40)]),
        Message(role="user", content=[text("u" * 40)]),
    ]
    assert context_tokens(msgs).usage_index == -1
    assert context_tokens(msgs).tokens == 28


def test_images_are_counted_at_a_fixed_cost() -> None:
    m = Message(role="user", content=[tl.image("A" * 100_000), text("look")])
    assert estimate_message(m) == 4 + 1 + IMAGE_TOKENS


def test_should_compact_when_the_context_passes_window_minus_reserve() -> None:
    assert should_compact(1001, 2000, 1000) is True
    assert should_compact(1000, 2000, 1000) is False


def test_file_ops_from_tool_calls_merge_with_previous_lists() -> None:
    msgs = [
        Message(
            role="assistant",
            content=[
                tool_use("1", "read", {"path": "a.py"}),
                tool_use("2", "edit", {"path": "b.py", "oldText": "x", "newText": "y"}),
                tool_use("3", "Read", {"file_path": "c.py"}),
                tool_use("4", "apply_patch", {"input": "*** Begin Patch\n*** Update File: d.py\n"}),
                tool_use("5", "bash", {"command": "cat e.py"}),
            ],
        )
    ]
    got = file_ops(msgs, FileOps(read=["b.py", "old.py"], modified=["z.py"]))
    assert got == FileOps(read=["a.py", "c.py", "old.py"], modified=["b.py", "d.py", "z.py"])


def _turns(s: tl.Session, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        s.append_message("user", f"request {i}\nwith details")
        s.append_message(
            "assistant", [text(f"working on {i}"), tool_use(f"t{i}", "read", {"path": f"f{i}.py"})]
        )
        s.append_message("tool", [tool_result(f"t{i}", "x" * 200)])
        s.append_message("assistant", f"finished {i}")


def test_compaction_replaces_history_with_a_summary_and_keeps_the_tail() -> None:
    s = tl.open_store("memory://").create()
    _turns(s, 6)
    before = [m.text for m in s.context().messages]
    result = compact(s, keep_recent_tokens=150)
    ctx = s.context()
    assert ctx.messages[0].role == "compactionSummary"
    assert ctx.messages[0].text == result.summary
    kept = result.plan.kept_ids
    assert [v for v in ctx.view.ids()[1:]] == [k for k in kept if s.state.types[k] == "message"]
    assert [m.text for m in ctx.messages[1:]] == before[-len(ctx.messages) + 1 :]
    entry = s.entry(result.entry_id)
    assert entry.payload.details["read_files"] == result.plan.files.read
    assert entry.payload.tokens_before == result.plan.tokens_before


def test_chained_compactions_never_lose_a_message() -> None:
    s = tl.open_store("memory://").create()
    covered: set[str] = set()
    _turns(s, 5)
    first = compact(s, keep_recent_tokens=200)
    covered |= set(first.plan.summarize_ids) | set(first.plan.turn_prefix_ids)
    _turns(s, 5, start=5)
    second = compact(s, keep_recent_tokens=200)
    covered |= set(second.plan.summarize_ids) | set(second.plan.turn_prefix_ids)
    # the second compaction starts from what the first kept
    assert first.plan.kept_ids[0] in (
        second.plan.summarize_ids + second.plan.turn_prefix_ids + second.plan.kept_ids
    )
    in_context = set(s.context().view.ids())
    message_ids = [e for e in s.path_ids() if s.state.types[e] == "message"]
    missing = [e for e in message_ids if e not in covered and e not in in_context]
    assert missing == []
    # the second summary still lists the requests the first one summarized
    goal = second.summary.split("## Progress")[0]
    assert "- request 0" in goal and "- request 9" not in goal


def test_files_are_carried_forward_across_compactions() -> None:
    s = tl.open_store("memory://").create()
    _turns(s, 4)
    first = compact(s, keep_recent_tokens=150)
    _turns(s, 4, start=4)
    second = compact(s, keep_recent_tokens=150)
    assert set(first.plan.files.read) <= set(second.plan.files.read)
    assert "f0.py" in second.plan.files.read
    assert "- Read: " + ", ".join(second.plan.files.read) in second.summary


def test_compacting_right_after_a_compaction_is_refused() -> None:
    s = tl.open_store("memory://").create()
    _turns(s, 4)
    compact(s, keep_recent_tokens=150)
    n = len(s.entries())
    with pytest.raises(UserError, match=r"was just compacted; add messages before compacting"):
        compact(s, keep_recent_tokens=150)
    assert len(s.entries()) == n


def test_nothing_to_compact_when_everything_fits_in_the_keep_window() -> None:
    s = tl.open_store("memory://").create()
    _turns(s, 2)
    with pytest.raises(
        UserError,
        match=r"nothing to compact: its \d+ tokens since the last "
        r"compaction fit in keep_recent_tokens=100000",
    ):
        prepare_compaction(s, keep_recent_tokens=100_000)


def test_a_split_turn_gets_its_own_prefix_summary() -> None:
    s = _table_session()
    plan = prepare_compaction(s, keep_recent_tokens=1, estimate_tokens=_hundred)
    assert plan.is_split_turn
    path = s.path_ids()
    assert plan.summarize_ids == path[0:3]
    assert plan.turn_prefix_ids == path[3:6]
    assert plan.first_kept_entry_id == path[6]
    result = compact(s, plan=plan)
    assert "\n\n## Turn in progress\n### Goal\n- u3\n" in result.summary


@pytest.mark.parametrize("fmt", formats.PROVIDER_FORMATS)
def test_context_after_compaction_passes_the_provider_validators(fmt: str) -> None:
    store = tl.open_store("memory://")
    s = store.create()
    _turns(s, 8)
    for keep in (90, 120, 260, 400):
        s2 = store.fork(s.id)
        compact(s2, keep_recent_tokens=keep)
        ctx = list(s2.context().messages)
        formats.dump_context(fmt, ctx)  # raises UserError on any broken rule
        assert not ctx[1].tool_results and ctx[1].role != "tool"


def test_a_stale_plan_is_refused() -> None:
    s = tl.open_store("memory://").create()
    _turns(s, 4)
    plan = prepare_compaction(s, keep_recent_tokens=150)
    s.append_message("user", "one more")
    with pytest.raises(UserError, match="made for another leaf"):
        compact(s, plan=plan)


def test_extractive_summary_folds_old_requests_to_fit_a_budget() -> None:
    msgs = [Message(role="user", content=[text(f"request number {i}")]) for i in range(100)]
    full = ExtractiveSummarizer().summarize(msgs)
    assert full.count("- request number") == 100
    short = ExtractiveSummarizer().summarize(msgs, max_tokens=200)
    assert len(short) // 4 <= 200
    lines = short.split("## Progress")[0].splitlines()
    folded = int(lines[1].split()[2])
    assert lines[1] == f"- … {folded} earlier requests"
    assert lines[2] == f"- request number {folded}"
    assert lines[-2] == "- request number 99"


# -- properties over random conversations ----------------------------------------------------

# a turn: user text, then some tool rounds (assistant call + result), then maybe a final reply
TURN = st.tuples(st.integers(1, 300), st.lists(st.integers(1, 400), max_size=3), st.booleans())


def _build(turns: list[tuple[int, list[int], bool]], s: tl.Session | None = None) -> tl.Session:
    s = s or tl.open_store("memory://").create()
    base = len(s.entries())
    for t, (user_len, rounds, final) in enumerate(turns):
        s.append_message("user", f"req {base}-{t} " + "u" * user_len)
        for r, size in enumerate(rounds):
            cid = f"c{base}-{t}-{r}"
            s.append_message("assistant", [tool_use(cid, "read", {"path": f"p{r}.py"})])
            s.append_message("tool", [tool_result(cid, "r" * size)])
        if final or not rounds:
            s.append_message("assistant", "ok " * (user_len // 10 + 1))
    return s


@settings(max_examples=60, deadline=None)
@given(st.lists(TURN, min_size=1, max_size=8), st.integers(0, 3000))
def test_cut_points_are_always_safe(turns: list[Any], keep: int) -> None:
    entries = _build(turns).path()
    cut = find_cut_point(entries, keep)
    c = cut.first_kept_index
    # a safe cut point, or (a split turn whose tool exchanges alone exceed the budget) the
    # assistant message that opens a tool exchange
    assert (
        c == 0
        or is_cut_point(entries[c])
        or (
            cut.is_split_turn
            and entries[c].message.role == "assistant"
            and entries[c].message.tool_uses
        )
    )
    kept_calls = {u.id for e in entries[c:] for u in e.message.tool_uses}
    kept_results = {r.tool_use_id for e in entries[c:] for r in e.message.tool_results}
    assert kept_results <= kept_calls  # no kept tool result lost its call
    if cut.is_split_turn:
        assert entries[cut.turn_start_index].message.is_user_input
        assert not entries[c].message.is_user_input
        assert all(not e.message.is_user_input for e in entries[cut.turn_start_index + 1 : c])
    else:
        assert cut.turn_start_index == -1
        assert c == 0 or entries[c].message.is_user_input


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(TURN, min_size=1, max_size=5), min_size=2, max_size=4), st.integers(50, 800)
)
def test_chained_compactions_cover_every_message(batches: list[Any], keep: int) -> None:
    s = tl.open_store("memory://").create()
    covered: set[str] = set()
    for batch in batches:
        _build(batch, s)
        try:
            result = compact(s, keep_recent_tokens=keep)
        except UserError:
            continue  # nothing to compact yet
        covered |= set(result.plan.summarize_ids) | set(result.plan.turn_prefix_ids)
        ctx = list(s.context().messages)
        for fmt in formats.PROVIDER_FORMATS:
            formats.dump_context(fmt, ctx)
    in_context = set(s.context().view.ids())
    messages = [e for e in s.path_ids() if s.state.types[e] == "message"]
    assert [e for e in messages if e not in covered and e not in in_context] == []


def test_an_offline_bpe_tokenizer_can_replace_the_estimate() -> None:
    from threadline import tokens

    assert tokens.tokenizer_name() == "chars/4"
    tokens.use_tokenizer("o200k_base")
    try:
        assert tokens.tokenizer_name() == "o200k_base"
        assert tokens.estimate_text("Hello world, this is a test of the tokenizer.") == 11
        m = Message(role="user", content=[text("Hello world"), tool_use("1", "read", {"a": 1})])
        assert tokens.estimate_message(m) == 4 + 2 + 1 + 5  # overhead, text, name, '{"a":1}'
    finally:
        tokens.use_tokenizer(None)
    assert tokens.estimate_text("Hello world, this is a test of the tokenizer.") == 12
    with pytest.raises(UserError, match="Unknown tokenizer 'nope'"):
        tokens.use_tokenizer("nope")
    assert tokens.tokenizer_name() == "chars/4"
