"""Summarizers: the LLM one against a local OpenAI-compatible server (with failures), the
extractive one section by section on a real pi transcript."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import threadline as tl
from conftest import REALDATA
from threadline import formats
from threadline.compaction import (
    ExtractiveSummarizer,
    FileOps,
    LLMSummarizer,
    compact,
    first_line,
    prepare_branch_summary,
    prepare_compaction,
    summarize_branch,
)
from threadline.errors import ProviderError
from threadline.model.content import Block, Message, text, thinking, tool_result, tool_use
from threadline.providers import get_provider
from threadline.testing import FakeAnthropicServer, FakeOpenAIServer, Hang, HTTPFailure

LLM_SUMMARY = (
    "## Goal\n- fix the parser\n\n## Progress\n- read f0.py\n\n## Key decisions\n- none"
    "\n\n## Next steps\n- run tests\n\n## Files\n- Read: f0.py"
)


def _fill(s: tl.Session, n: int) -> None:
    for i in range(n):
        s.append_message("user", f"request {i}")
        s.append_message(
            "assistant", [text(f"on it {i}"), tool_use(f"t{i}", "read", {"path": f"f{i}.py"})]
        )
        s.append_message("tool", [tool_result(f"t{i}", "y" * 300)])
        s.append_message("assistant", f"finished {i}")


def test_llm_summarizer_writes_the_model_summary(jsonl_store: Any) -> None:
    s = jsonl_store.create()
    _fill(s, 6)
    with FakeOpenAIServer([LLM_SUMMARY]) as srv:
        summarizer = LLMSummarizer(get_provider("summarizer-model", base_url=srv.base_url))
        result = compact(s, summarizer, keep_recent_tokens=100)  # the last turn, unsplit
        body = srv.requests[0].body
    assert not result.plan.is_split_turn and len(srv.requests) == 1
    assert result.summary == LLM_SUMMARY
    assert s.context().messages[0].text == LLM_SUMMARY
    assert s.entry(result.entry_id).payload.details["summarizer"] == "llm"
    assert body["model"] == "summarizer-model"
    system, user = body["messages"]
    assert system["role"] == "system" and "only summarize" in system["content"]
    prompt = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
    assert "[user]: request 0\n[assistant]: on it 0\n[assistant tool call] read" in prompt
    assert "'## Goal', '## Progress', '## Key decisions', '## Next steps', '## Files'" in prompt
    assert "Files read: f0.py" in prompt


def test_llm_summarizer_over_the_anthropic_api() -> None:
    s = tl.open_store("memory://").create()
    _fill(s, 4)
    with FakeAnthropicServer([LLM_SUMMARY]) as srv:
        summarizer = LLMSummarizer(get_provider("claude-haiku", base_url=srv.base_url, api_key="k"))
        result = compact(s, summarizer, keep_recent_tokens=100)
        body = srv.requests[0].body
    assert result.summary == LLM_SUMMARY
    assert "only summarize" in body["system"]
    assert [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize("failure", [HTTPFailure(500, "overloaded"), Hang(10)])
def test_a_failing_summarizer_leaves_the_session_unchanged(jsonl_store: Any, failure: Any) -> None:
    s = jsonl_store.create()
    _fill(s, 6)
    before_entries = len(s.entries())
    before_leaf = s.leaf_id
    before_bytes = s.state.log.path.read_bytes()
    with FakeOpenAIServer([failure]) as srv:
        summarizer = LLMSummarizer(get_provider("m", base_url=srv.base_url), timeout=0.5)
        with pytest.raises(ProviderError, match=r"HTTP 500|timed out after 0\.5s"):
            compact(s, summarizer, keep_recent_tokens=200)
    assert len(s.entries()) == before_entries
    assert s.leaf_id == before_leaf
    assert s.state.log.path.read_bytes() == before_bytes
    reopened = jsonl_store.open(s.id)
    assert [m.text for m in reopened.context().messages] == [m.text for m in s.context().messages]


def test_an_empty_model_reply_is_an_error_not_an_empty_summary() -> None:
    s = tl.open_store("memory://").create()
    _fill(s, 4)
    with FakeOpenAIServer(["   "]) as srv:
        summarizer = LLMSummarizer(get_provider("m", base_url=srv.base_url))
        with pytest.raises(ProviderError, match="returned an empty summary"):
            compact(s, summarizer, keep_recent_tokens=200)
    assert s.state.types[s.path_ids()[-1]] == "message"


def test_llm_branch_summary_leaves_tool_results_out() -> None:
    s = tl.open_store("memory://").create()
    s.append_message("user", "start")
    fork = s.append_message("assistant", "ok")
    _fill(s, 2)
    plan = prepare_branch_summary(s, fork)
    assert plan.common_ancestor_id == fork
    assert [m.role for m in plan.messages] == ["user", "assistant", "assistant"] * 2
    with FakeOpenAIServer(["## Goal\n- tried reading"]) as srv:
        summary, details = summarize_branch(
            LLMSummarizer(get_provider("m", base_url=srv.base_url)), plan
        )
        prompt = srv.requests[0].body["messages"][1]["content"]
    assert summary == "## Goal\n- tried reading"
    assert details["read_files"] == ["f0.py", "f1.py"]
    assert "yyyy" not in str(prompt)
    assert "a branch the user is leaving" in str(prompt)


def test_branch_summary_keeps_the_newest_messages_under_the_budget() -> None:
    s = tl.open_store("memory://").create()
    root = s.append_message("user", "root")
    for i in range(10):
        s.append_message("user", f"msg {i} " + "z" * 36)  # 4 + 11 tokens each
    plan = prepare_branch_summary(s, root, token_budget=45)
    assert [m.text.split(" z")[0] for m in plan.messages] == ["msg 7", "msg 8", "msg 9"]
    assert len(plan.entry_ids) == 10


# -- the extractive summarizer on a real pi transcript ----------------------------------------

PI_FILE = REALDATA / "pi_session" / "badlogic_pi-mono__large-session.jsonl"


def _pi_messages(path: Path) -> tuple[list[Message], list[dict[str, Any]]]:
    """A minimal reading of a pi v1 transcript (messages only), and the raw message dicts."""
    out: list[Message] = []
    raws: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("type") != "message":
            continue
        m = rec["message"]
        raws.append(m)
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        blocks: list[Block] = []
        if m["role"] == "toolResult":
            body = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")
            blocks.append(tool_result(m["toolCallId"], body, bool(m.get("isError"))))
            out.append(Message(role="tool", content=blocks))
            continue
        for p in parts:
            if p["type"] == "text":
                blocks.append(text(p["text"]))
            elif p["type"] == "thinking":
                blocks.append(thinking(p["thinking"]))
            elif p["type"] == "toolCall":
                blocks.append(tool_use(p["id"], p["name"], p.get("arguments") or {}))
        out.append(Message(role=m["role"], content=blocks))
    return out, raws


def _section(summary: str, name: str) -> list[str]:
    chunk = summary.split(f"## {name}\n", 1)[1].split("\n\n## ", 1)[0]
    return chunk.splitlines()


def test_extractive_summary_of_a_real_pi_session_section_by_section() -> None:
    messages, raws = _pi_messages(PI_FILE)
    half = len(messages) // 2
    first, second = messages[:half], messages[half:]
    files1 = FileOps(read=["docs/theme.md"], modified=[])
    summarizer = ExtractiveSummarizer()
    s1 = summarizer.summarize(first, files=files1)
    s2 = summarizer.summarize(
        second, previous_summary=s1, files=FileOps(read=["a.ts"], modified=["b.ts"])
    )

    def user_lines(raw: list[dict[str, Any]]) -> list[str]:
        out = []
        for m in raw:
            if m["role"] != "user":
                continue
            c = m["content"]
            body = (
                c
                if isinstance(c, str)
                else "\n".join(p.get("text", "") for p in c if p.get("type") == "text")
            )
            out.append(first_line(body) or "[image]")
        return out

    requests = user_lines(raws)
    assert len(requests) == 88
    # Goal: every user request, first line, in order; the second summary carries the first's
    assert _section(s1, "Goal") == [f"- {r}" for r in user_lines(raws[:half])]
    assert _section(s2, "Goal") == [f"- {r}" for r in requests]
    assert _section(s2, "Goal")[:2] == [
        "- /mode",
        "- read packages/coding-agent/docs/theme.md in full, then "
        "theme.ts, and then oauth-selector or any of the other "
        "selectors. we still need to port over user-message-sele"
        "ctor.ts based on the patterns you f…",
    ]
    assert len(_section(s2, "Goal")[1]) == len("- ") + 200
    # Progress: replies and tool calls by tool, summed over both halves
    tools = Counter(
        p["name"]
        for m in raws
        if m["role"] == "assistant"
        for p in m["content"]
        if p["type"] == "toolCall"
    )
    errors = sum(1 for m in raws if m["role"] == "toolResult" and m.get("isError"))
    assert _section(s2, "Progress") == [
        "- Assistant replies: 453",
        f"- Tool calls: {sum(tools.values())} ("
        + ", ".join(f"{t} {c}" for t, c in sorted(tools.items()))
        + ")",
        f"- Tool errors: {errors}",
    ]
    # Key decisions: first lines of the last three assistant texts of the second half
    texts = [
        first_line("\n".join(p["text"] for p in m["content"] if p["type"] == "text"))
        for m in raws[half:]
        if m["role"] == "assistant"
    ]
    texts = [t for t in texts if t]
    assert _section(s2, "Key decisions") == [f"- {t}" for t in texts[-3:]]
    assert _section(s2, "Next steps") == [f"- Continue from the latest request: {requests[-1]}"]
    assert _section(s2, "Files") == ["- Read: a.ts", "- Modified: b.ts"]
    assert s2 == summarizer.summarize(
        second, previous_summary=s1, files=FileOps(read=["a.ts"], modified=["b.ts"])
    )


def test_compaction_of_a_real_pi_session_keeps_the_tail_and_tracks_files() -> None:
    messages, _raws = _pi_messages(PI_FILE)
    s = tl.open_store("memory://").create()
    for m in messages:
        s.append_message(m)
    plan = prepare_compaction(s, keep_recent_tokens=20_000)
    assert plan.tokens_before > 20_000
    assert "packages/coding-agent/docs/theme.md" in plan.files.modified  # read, then edited
    assert "AGENTS.md" in plan.files.read
    result = compact(s, plan=plan)
    ctx = list(s.context().messages)
    assert ctx[0].text == result.summary
    assert ctx[1].role != "tool"
    formats.dump_context("anthropic", ctx)


def test_a_foreign_previous_summary_is_kept_under_earlier_summary_and_carried_forward() -> None:
    from threadline.formats import pi

    s = pi.import_session(
        tl.open_store("memory://"),
        REALDATA / "pi_session" / "badlogic_pi-mono__before-compaction.jsonl",
    )
    pi_summary = s.entry("L629").payload.summary  # pi's own (LLM-written) compaction summary
    first = compact(s, keep_recent_tokens=20_000)
    assert first.plan.previous_compaction_id == "L629"
    earlier = first.summary.split("\n## Earlier summary\n", 1)[1].split("\n\n## Turn")[0]
    assert earlier.startswith("#### Context Checkpoint: Coding Agent Refactoring\n\n##### Branch\n")
    # verbatim, headings three levels down
    assert re.sub(r"^###(#+ )", r"\1", earlier, flags=re.MULTILINE) == pi_summary.strip()
    for f in formats.PROVIDER_FORMATS:
        formats.dump_context(f, list(s.context().messages))
    _fill(s, 30)
    second = compact(s, keep_recent_tokens=500)
    assert second.summary.split("\n## Earlier summary\n", 1)[1].split("\n\n## Turn")[0] == earlier

    def goal_lines(summary: str) -> list[str]:  # "## Goal" and a turn in progress' "### Goal"
        out = []
        for part in summary.split("## Goal\n")[1:]:
            out += [ln for ln in part.split("\n\n")[0].splitlines() if ln.startswith("- ")]
        return out

    def requests(msgs: list[Message]) -> list[str]:
        return [
            f"- {first_line(m.text)}"
            for m in msgs
            if m.is_user_input or m.role in ("bashExecution", "custom")
        ]

    # every request of the first summary, then the newly summarized ones, then the split turn's
    assert goal_lines(second.summary) == (
        goal_lines(first.summary)
        + requests(second.plan.messages_to_summarize)
        + requests(second.plan.turn_prefix)
    )
