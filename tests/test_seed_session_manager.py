"""The SessionManager seed (001), kept to the letter: load by path, fork from a file or another
store, list rows with the session's path, append under the leaf unless a parent is given,
provider-shaped content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import threadline as tl
from threadline.cli.main import cli


def _seed_simple_session(directory: Path) -> Path:
    """The seed's §12.1 example file, written by hand."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sess-123.jsonl"
    path.write_text(
        '{"type":"session","id":"sess-123","version":1,"timestamp":"2024-01-01T10:00:00Z"}\n'
        '{"type":"message","id":"msg-1","parent_id":null,"timestamp":"2024-01-01T10:00:01Z",'
        '"message":{"role":"user","content":[{"type":"text","text":{"content":"Hello"}}]}}\n'
        '{"type":"message","id":"msg-2","parent_id":"msg-1","timestamp":"2024-01-01T10:00:02Z",'
        '"message":{"role":"assistant","content":[{"type":"text","text":{"content":"Hi there!"}}]}}'
        "\n",
        encoding="utf-8",
    )
    return path


def test_open_path_loads_a_session_file_wherever_it_lives(tmp_path: Path) -> None:
    path = _seed_simple_session(tmp_path / "elsewhere")
    s = tl.open_path(path)
    assert s.id == "sess-123"
    assert [m.text for m in s.context().messages] == ["Hello", "Hi there!"]
    # appends go to that file, under the leaf
    new = s.append_message("user", "And you?")
    s.close()
    last = json.loads(path.read_text().splitlines()[-1])
    assert (last["id"], last["parent_id"]) == (new, "msg-2")
    # the store's own open_path takes the same path, and the location list() rows carry
    store = tl.open_store(tmp_path / "store")
    assert store.open_path(path).leaf_id == new


def test_show_takes_a_session_file_path(tmp_path: Path) -> None:
    path = _seed_simple_session(tmp_path / "elsewhere")
    res = CliRunner().invoke(cli, ["--store", str(tmp_path / "store"), "show", str(path)])
    assert res.exit_code == 0, res.output
    assert res.output == (
        "Session sess-123: 2 entries, 2 messages in the file, 2 in context; "
        "model -, thinking off\n"
        "[0] user msg-1\n    Hello\n[1] assistant msg-2\n    Hi there!\n"
    )


def test_list_rows_carry_the_sessions_path_or_url(
    store: tl.store.BaseStore, tmp_path: Path
) -> None:
    s = store.create(session_id="listed")
    s.append_message("user", "hi")
    s.close()
    row = next(r for r in store.list() if r.id == "listed")
    if store.url.startswith("/") or store.url.startswith(str(tmp_path)):
        assert row.path == str((tmp_path / "sessions" / "listed.jsonl").resolve())
    else:
        assert row.path.endswith("#listed") and ":" not in row.path.split("@")[0].split("//")[-1]
    assert store.open_path(row.path).id == "listed"


def test_fork_from_a_session_file_into_another_store(
    store: tl.store.BaseStore, tmp_path: Path
) -> None:
    path = _seed_simple_session(tmp_path / "elsewhere")
    copy = store.fork_from(path)
    assert copy.header.parent_session == "sess-123"
    assert copy.entry_ids() == ["msg-1", "msg-2"]
    assert copy.leaf_id == "msg-2"
    # and from an open session of a different backend
    other = tl.open_store("memory://")
    src = other.create(session_id="src")
    src.append_message("user", "from memory")
    copy2 = store.fork_from(src)
    assert [m.text for m in copy2.context().messages] == ["from memory"]
    assert copy2.id != "src" and store.exists(copy2.id)


def test_fork_cli_from_another_store(tmp_path: Path) -> None:
    src_dir = tmp_path / "src"
    _seed_simple_session(src_dir)
    dest = tmp_path / "dest"
    res = CliRunner().invoke(
        cli, ["--store", str(dest), "fork", "sess-123", "--from-store", str(src_dir)]
    )
    assert res.exit_code == 0, res.output
    new_id = res.output.strip()
    assert tl.open_store(dest).open(new_id).entry_ids() == ["msg-1", "msg-2"]


def test_append_parents_to_the_leaf_unless_a_parent_is_given(tmp_path: Path) -> None:
    s = tl.open_store("memory://").create()
    m1 = s.append_message("user", "Hello, Agent!")
    m2 = s.append_message("assistant", "Hello! How can I help?")
    m3 = s.append_message("user", "Actually, tell me a joke.", parent_id=m1)
    assert s.entry(m3).parent_id == m1 and s.leaf_id == m3
    # a whole record in the file's shape, without parent_id: under the leaf
    r = s.append(
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": {"content": "Why did the chicken…"}}],
            },
        }
    )
    assert s.entry(r).parent_id == m3
    # with a parent given in the record
    r2 = s.append({"type": "custom", "parent_id": m2, "custom": {"custom_type": "x", "data": 1}})
    assert s.entry(r2).parent_id == m2 and s.leaf_id == r2


def test_append_message_accepts_provider_shaped_content() -> None:
    s = tl.open_store("memory://").create()
    a = s.append_message("user", [{"type": "text", "text": "x"}])
    b = s.append_message(
        "assistant",
        [
            {"type": "output_text", "text": "calling"},
            {
                "type": "tool_use",
                "id": "call_abc",
                "name": "read_file",
                "input": {"path": "main.go"},
            },
        ],
    )
    c = s.append_message(
        "tool", [{"type": "tool_result", "tool_use_id": "call_abc", "content": "package main..."}]
    )
    d = s.append_message("user", [{"text": "a Gemini part"}])
    enc = [msgspec_builtins(s.entry(e).message.content) for e in (a, b, c, d)]  # type: ignore[union-attr]
    assert enc == [
        [{"type": "text", "text": {"content": "x"}}],
        [
            {"type": "text", "text": {"content": "calling"}},
            {
                "type": "tool_use",
                "tool_use": {"id": "call_abc", "name": "read_file", "input": {"path": "main.go"}},
            },
        ],
        [
            {
                "type": "tool_result",
                "tool_result": {"tool_use_id": "call_abc", "content": "package main..."},
            }
        ],
        [{"type": "text", "text": {"content": "a Gemini part"}}],
    ]


def msgspec_builtins(value: object) -> object:
    import msgspec

    return msgspec.to_builtins(value)


def _long_tool_turn(s: tl.Session, calls: int) -> None:
    s.append_message("user", "Read main.go and the files it imports")
    for k in range(calls):
        s.append_message(
            "assistant", [tl.tool_use(f"call_{k}", "read_file", {"path": f"pkg{k}.go"})]
        )
        body = "\n".join(f"func helper{k}_{n}(x int) int {{ return x * {n} }}" for n in range(120))
        s.append_message("tool", [tl.tool_result(f"call_{k}", body)])


def test_compaction_splits_a_turn_whose_newest_tool_exchange_exceeds_the_budget() -> None:
    from threadline.compaction import compact, prepare_compaction

    s = tl.open_store("memory://").create()
    _long_tool_turn(s, 2)
    path = s.path_ids()
    plan = prepare_compaction(s, keep_recent_tokens=300)
    # the newest exchange (call_1 and its result) is kept whole; the turn's start is summarized
    assert (plan.is_split_turn, plan.first_kept_entry_id, plan.kept_ids) == (
        True,
        path[3],
        path[3:],
    )
    assert plan.turn_prefix_ids == path[:3]
    before = plan.tokens_before
    compact(s, keep_recent_tokens=300)
    ctx = list(s.context().messages)
    assert [m.role for m in ctx] == ["compactionSummary", "assistant", "tool"]
    from threadline.compaction import session_tokens

    assert session_tokens(s).tokens < min(before - 1000, plan.kept_tokens + 300)


def test_compaction_never_goes_between_a_tool_call_and_its_result() -> None:
    from threadline.compaction import prepare_compaction
    from threadline.errors import UserError

    s = tl.open_store("memory://").create()
    _long_tool_turn(s, 2)
    s.append_message("assistant", [tl.tool_use("call_9", "read_file", {"path": "x.go"})])
    with pytest.raises(
        UserError,
        match=r"ends with a tool call waiting for its result "
        r"\(call_9\); compact after the result is appended",
    ):
        prepare_compaction(s, keep_recent_tokens=300)


def test_the_agent_loop_gets_back_under_its_threshold_with_one_long_tool_turn() -> None:
    from threadline.agent import AgentSession

    s = tl.open_store("memory://").create()
    agent = AgentSession(s, context_window=4000, reserve_tokens=1000, keep_recent_tokens=300)
    _long_tool_turn(s, 3)  # about 1,300 tokens per result: over the 3,000-token threshold
    assert agent.needs_compaction()
    result = agent.maybe_compact()
    assert result is not None and result.plan.is_split_turn
    assert agent.tokens().tokens < agent.threshold
