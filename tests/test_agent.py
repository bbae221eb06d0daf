"""AgentSession: an agent loop that persists every turn and compacts on its own."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import threadline as tl
from threadline import formats
from threadline.agent import AgentSession
from threadline.compaction import LLMSummarizer
from threadline.errors import ProviderError, UserError
from threadline.model.content import Message, text, tool_result
from threadline.providers import get_provider
from threadline.testing import FakeOpenAIServer, HTTPFailure, TestProvider, tool_call


def _user(s: str) -> Message:
    return Message(role="user", content=[text(s)])


def test_agent_loop_of_500_turns_compacts_and_stays_under_the_window() -> None:
    window = 6000
    session = tl.open_store("memory://").create()
    agent = AgentSession(
        session,
        context_window=window,
        reserve_tokens=1500,
        keep_recent_tokens=1500,
        summary_max_tokens=600,
    )
    script: list[Any] = []
    for i in range(500):
        script += [
            tool_call("read", {"path": f"src/mod{i % 37}.py"}, id=f"call_{i}"),
            f"Turn {i}: the module looks fine.",
        ]
    provider = TestProvider(script)
    peak = 0
    for i in range(500):
        agent.record(_user(f"task {i}: check module {i % 37}"))
        for fmt in formats.PROVIDER_FORMATS:
            formats.validate(fmt, agent.context_for_request(fmt))
        call = provider.complete(agent.messages())
        agent.record(call)
        result = "\n".join(f"line {k} of mod{i % 37}.py" for k in range(12))
        agent.record(Message(role="tool", content=[tool_result(f"call_{i}", result)]))
        payload = agent.context_for_request("openai_chat")  # validated by dump_context
        assert payload[-1]["role"] == "tool"
        agent.record(provider.complete(agent.messages()))
        tokens = agent.tokens().tokens
        peak = max(peak, tokens)
        assert tokens < window, f"turn {i}: {tokens} tokens"
    comp_ids = [e for e in session.path_ids() if session.state.types[e] == "compaction"]
    assert len(agent.compactions) == len(comp_ids)
    assert len(agent.compactions) == 154  # deterministic: estimator and script are fixed
    # no compaction entry sits between a tool call and its result in the file (session seed)
    path = session.path()
    for before, entry in itertools.pairwise(path):
        if entry.type == "compaction":
            assert before.type != "message" or not before.message.tool_uses
    assert agent.threshold - 1000 < peak < window
    # nothing vanished: the last summary lists every request that is no longer in the context
    ctx = list(session.context().messages)
    summary = ctx[0].text
    kept_requests = [m.text for m in ctx if m.is_user_input]
    # requests are listed under "## Goal" and, for a split turn, "## Turn in progress/### Goal"
    listed = [ln[2:] for ln in summary.splitlines() if ln.startswith("- task ")]
    folded = [ln for ln in summary.splitlines() if ln.startswith("- … ")]
    first_listed = int(listed[0].split()[1].rstrip(":"))
    assert folded == [f"- … {first_listed} earlier requests"]
    assert listed + kept_requests == [
        f"task {i}: check module {i % 37}" for i in range(first_listed, 500)
    ]
    assert "- Tool calls: " in summary and "(read " in summary


def test_record_persists_each_message_before_returning(tmp_path: Any) -> None:
    store = tl.open_store(tmp_path / "s")
    agent = AgentSession(
        store.create(), context_window=10_000, reserve_tokens=1000, keep_recent_tokens=2000
    )
    mid = agent.record(_user("hello"))
    reopened = store.open(agent.session.id, read_only=True)
    assert reopened.leaf_id == mid
    assert [m.text for m in reopened.context().messages] == ["hello"]


def test_manual_compact_and_its_refusal_right_after() -> None:
    agent = AgentSession(
        tl.open_store("memory://").create(),
        context_window=100_000,
        reserve_tokens=1000,
        keep_recent_tokens=50,
    )
    for i in range(6):
        agent.record(_user(f"question {i} " + "q" * 200))
        agent.record(Message(role="assistant", content=[text(f"answer {i}")]))
    result = agent.compact()
    assert agent.messages()[0].text == result.summary
    with pytest.raises(UserError, match="was just compacted"):
        agent.compact()


def test_a_failing_llm_summarizer_during_auto_compaction_changes_nothing() -> None:
    session = tl.open_store("memory://").create()
    with FakeOpenAIServer([HTTPFailure(500, "down")]) as srv:
        agent = AgentSession(
            session,
            context_window=2000,
            reserve_tokens=500,
            keep_recent_tokens=200,
            summarizer=LLMSummarizer(get_provider("m", base_url=srv.base_url)),
        )
        recorded = 0
        with pytest.raises(ProviderError, match="HTTP 500: down"):
            for i in range(20):
                agent.record(_user(f"q{i} " + "x" * 400))
                recorded += 1
        # the turn that triggered compaction is persisted; no compaction was written
        types = [session.state.types[e] for e in session.path_ids()]
        assert types == ["message"] * (recorded + 1)
        assert session.context().messages[-1].text.startswith(f"q{recorded} ")
        assert agent.compactions == []
        srv.add_replies("## Goal\n- q0 …")
        agent.record(_user("after the outage"))
    assert [m.role for m in agent.messages()][:1] == ["compactionSummary"]
    assert len(agent.compactions) == 1


def test_navigate_with_summary_branches_and_summarizes_the_abandoned_path() -> None:
    agent = AgentSession(
        tl.open_store("memory://").create(),
        context_window=50_000,
        reserve_tokens=1000,
        keep_recent_tokens=2000,
    )
    agent.record(_user("start"))
    fork = agent.record(Message(role="assistant", content=[text("ready")]))
    agent.record(_user("try approach A"))
    agent.record(tool_call("edit", {"path": "a.py"}, id="e1"))
    agent.record(Message(role="tool", content=[tool_result("e1", "edited")]))
    old_leaf = agent.record(Message(role="assistant", content=[text("A fails on input 3")]))
    summary_id = agent.navigate(fork)
    assert summary_id is not None
    entry = agent.session.entry(summary_id)
    assert entry.payload.from_id == old_leaf
    assert entry.parent_id == fork
    assert entry.payload.details["modified_files"] == ["a.py"]
    msgs = agent.messages()
    assert [m.role for m in msgs] == ["user", "assistant", "branchSummary"]
    assert "- try approach A" in msgs[2].text
    assert "- A fails on input 3" in msgs[2].text
    assert "- Modified: a.py" in msgs[2].text


def test_navigate_without_summary_only_moves_the_leaf() -> None:
    agent = AgentSession(
        tl.open_store("memory://").create(),
        context_window=50_000,
        reserve_tokens=1000,
        keep_recent_tokens=2000,
    )
    first = agent.record(_user("one"))
    agent.record(_user("two"))
    assert agent.navigate(first, summarize=False) is None
    assert agent.session.leaf_id == first


def test_an_aborted_branch_summary_leaves_the_leaf_where_it_was() -> None:
    agent = AgentSession(
        tl.open_store("memory://").create(),
        context_window=50_000,
        reserve_tokens=1000,
        keep_recent_tokens=2000,
        summarizer=LLMSummarizer(TestProvider([KeyboardInterrupt()])),
    )
    first = agent.record(_user("one"))
    leaf = agent.record(_user("two"))
    n = len(agent.session.entries())
    with pytest.raises(KeyboardInterrupt):
        agent.navigate(first)
    assert agent.session.leaf_id == leaf
    assert len(agent.session.entries()) == n


def test_settings_that_could_never_compact_are_refused() -> None:
    s = tl.open_store("memory://").create()
    with pytest.raises(UserError, match="reserve must be smaller than the window"):
        AgentSession(s, context_window=1000, reserve_tokens=1000)
    with pytest.raises(
        UserError,
        match=r"keep_recent_tokens=900 is not below the compaction "
        r"threshold \(800 = context_window - reserve_tokens\)",
    ):
        AgentSession(s, context_window=1000, reserve_tokens=200, keep_recent_tokens=900)


def test_the_agent_loop_repairs_an_interrupted_turn_before_the_next_model_call() -> None:
    session = tl.open_store("memory://").create()
    agent = AgentSession(
        session, context_window=10_000, reserve_tokens=1000, keep_recent_tokens=1000
    )
    provider = TestProvider([tool_call("read", {"path": "a"}, id="call_a"), "Done."])
    agent.record(_user("read a"))
    agent.record(provider.complete(agent.messages()))
    # the tool is running: the call of the last message is left pending
    assert agent.repair_interrupted() is None
    assert agent.messages()[-1].tool_uses[0].id == "call_a"
    # ... the agent was killed before the result; the user asks again
    agent.record(_user("are you there?"))
    payload = agent.context_for_request("anthropic")
    assert session.repair().calls == []  # written to the log
    assert payload["messages"][2]["content"][0]["tool_use_id"] == "call_a"
    formats.dump_context("openai_chat", agent.messages(), strict=True)
    (done,) = agent.repairs
    assert [c.call_id for c in done.calls] == ["call_a"]
    assert session.undo_repair() == done.op_ids
    assert (
        AgentSession(
            session,
            context_window=10_000,
            reserve_tokens=1000,
            keep_recent_tokens=1000,
            auto_repair=False,
        )
        .messages()[2]
        .role
        == "user"
    )
