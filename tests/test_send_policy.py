"""The send policy on the four failures seen on real histories, and on each adjustment's exact
output (docs/formats.md, "Send policy")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REALDATA
from threadline import formats, importing
from threadline.errors import UserError
from threadline.formats import anthropic, chatgpt_export, codex, openai_chat, openai_responses
from threadline.formats.policy import EMPTY_USER_TEXT, LEADING_USER_TEXT, Adjustment, Dumped
from threadline.model.content import Message, text, thinking, tool_result, tool_use
from threadline.model.pairing import INTERRUPTED

# -- 1. Claude Code: one turn's parallel calls as several assistant records ------------------


def test_claude_code_parallel_calls_split_over_records_go_to_openai_chat_as_one_message() -> None:
    (draft,) = importing.prepare(
        "claude_code", REALDATA / "claude_code" / "marot_spotter__tool_heavy.jsonl"
    )
    messages = importing.messages_of(draft)
    with pytest.raises(UserError, match=r"merged_turn: 4 consecutive assistant messages"):
        openai_chat.dump(messages, strict=True)
    dumped = formats.dump_context("openai_chat", messages, report=True)
    assert [a.kind for a in dumped.adjustments] == ["merged_turn"]
    at = dumped.adjustments[0].position
    assert [m.role for m in messages[at : at + 5]] == ["assistant"] * 4 + ["user"]
    split = [u.id for m in messages[at : at + 4] for u in m.tool_uses]
    assert len(split) >= 2
    merged = next(
        m for m in dumped.payload if m.get("tool_calls") and m["tool_calls"][0]["id"] == split[0]
    )
    assert [c["id"] for c in merged["tool_calls"]] == split
    # Anthropic merges the turn in its shaping; only the record holding blank text ("\n\n",
    # which Anthropic refuses) is left out
    assert [
        str(a) for a in formats.dump_context("anthropic", messages, report=True).adjustments
    ] == [f"[{at}] dropped_empty_message: assistant message with no text left out"]


def test_split_turn_merged_for_openai_chat_exactly() -> None:
    history = [
        Message(role="user", content=[text("a and b")]),
        Message(role="assistant", content=[text("Both."), tool_use("a", "read")]),
        Message(role="assistant", content=[tool_use("b", "read")]),
        Message(role="tool", content=[tool_result("a", "A")]),
        Message(role="tool", content=[tool_result("b", "B")]),
    ]
    assert openai_chat.dump(history) == [
        {"role": "user", "content": "a and b"},
        {
            "role": "assistant",
            "content": "Both.",
            "tool_calls": [
                {"type": "function", "id": "a", "function": {"name": "read", "arguments": "{}"}},
                {"type": "function", "id": "b", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
    ]


# -- 2. dangling calls: answered (default) or dropped -----------------------------------------

CUT = [
    Message(role="user", content=[text("read a")]),
    Message(role="assistant", content=[text("Reading."), tool_use("a", "read")]),
    Message(role="user", content=[text("stop")]),
]


def test_a_dangling_call_is_answered_as_interrupted_and_reported() -> None:
    dumped = openai_chat.dump(CUT, report=True)
    assert dumped.payload == [
        {"role": "user", "content": "read a"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {"type": "function", "id": "a", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": f"Error: {INTERRUPTED}"},
        {"role": "user", "content": "stop"},
    ]
    assert dumped.adjustments == [
        Adjustment(
            kind="answered_dangling_call",
            position=1,
            detail="tool call 'a' (read) has no result; answered as interrupted",
        )
    ]
    assert CUT[1].tool_uses[0].id == "a" and len(CUT) == 3  # the input is not modified


def test_dangling_drop_leaves_the_call_out_but_keeps_the_text() -> None:
    payload = anthropic.dump(CUT, dangling="drop")
    assert payload == {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading."}]},
            {"role": "user", "content": [{"type": "text", "text": "stop"}]},
        ]
    }
    with pytest.raises(UserError, match=r"dangling='later' is not a choice"):
        anthropic.dump(CUT, dangling="later")  # type: ignore[call-overload]


def test_results_typed_after_a_user_message_are_moved_in_front_of_it() -> None:
    history = [
        CUT[0],
        CUT[1],
        Message(role="user", content=[text("hurry")]),
        Message(role="tool", content=[tool_result("a", "A")]),
    ]
    dumped = openai_chat.dump(history, report=True)
    assert [(m["role"], m.get("tool_call_id")) for m in dumped.payload] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("user", None),
    ]
    assert [a.kind for a in dumped.adjustments] == ["moved_tool_result"]


def test_a_result_without_its_call_is_sent_as_user_text() -> None:
    history = [
        Message(role="tool", content=[tool_result("gone", "old output")]),
        Message(role="user", content=[text("go on")]),
    ]
    dumped = anthropic.dump(history, report=True)
    assert dumped.payload == {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "[tool result for call gone]\nold output"},
                    {"type": "text", "text": "go on"},
                ],
            }
        ]
    }
    assert [a.kind for a in dumped.adjustments] == ["orphan_result_as_text"]


# -- 3. Codex: reasoning without ids, sent to the Responses API -------------------------------


def _rollout(tmp_path: Path) -> Path:
    items = [
        {
            "type": "session_meta",
            "payload": {
                "id": "019f0000-0000-7000-8000-000000000000",
                "timestamp": "2026-01-01T00:00:00.000Z",
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "list the files"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Use ls."}],
                "content": None,
                "encrypted_content": "gAAAAB-opaque",
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Running ls."}],
            },
        },
    ]
    path = tmp_path / "rollout-2026-01-01T00-00-00-x.jsonl"
    path.write_text(
        "".join(json.dumps({"timestamp": "2026-01-01T00:00:00.000Z", **i}) + "\n" for i in items),
        encoding="utf-8",
    )
    return path


def test_codex_reasoning_without_an_id_goes_to_responses_as_think_text(tmp_path: Path) -> None:
    messages = codex.load(_rollout(tmp_path))
    with pytest.raises(UserError, match=r"reasoning_as_text: reasoning item without an id"):
        openai_responses.dump(messages, strict=True)
    dumped = formats.dump_context("openai_responses", messages, report=True)
    assert dumped.payload == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "list the files"}],
        },
        {"role": "assistant", "content": "<think>\nUse ls.\n</think>"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Running ls."}],
        },
    ]
    assert dumped.adjustments == [
        Adjustment(
            kind="reasoning_as_text",
            position=1,
            detail="reasoning item without an id sent as <think> text",
        )
    ]


# -- 4. ChatGPT: a reasoning node with only a summary ------------------------------------------


def _export() -> dict[str, object]:
    def node(
        nid: str,
        parent: str | None,
        child: str | None,
        role: str | None,
        content: dict[str, object],
    ) -> dict[str, object]:
        message = (
            None
            if role is None
            else {"id": nid, "author": {"role": role}, "content": content, "recipient": "all"}
        )
        return {
            "id": nid,
            "parent": parent,
            "children": [child] if child else [],
            "message": message,
        }

    chain = [
        ("root", None, {}),
        ("u", "user", {"content_type": "text", "parts": ["Why?"]}),
        (
            "t",
            "assistant",
            {
                "content_type": "thoughts",
                "thoughts": [{"summary": "Weighing the question", "content": "", "finished": True}],
            },
        ),
        ("r", "assistant", {"content_type": "reasoning_recap", "content": "Thought for 3 seconds"}),
        ("a", "assistant", {"content_type": "text", "parts": ["Because."]}),
    ]
    mapping = {}
    for k, (nid, role, content) in enumerate(chain):
        parent = chain[k - 1][0] if k else None
        child = chain[k + 1][0] if k + 1 < len(chain) else None
        mapping[nid] = node(nid, parent, child, role, content)
    return {"id": "c1", "title": "t", "mapping": mapping, "current_node": "a"}


def test_a_summary_only_chatgpt_reasoning_node_keeps_its_summary_and_dumps_valid() -> None:
    messages = chatgpt_export.load(_export())
    assert [(m.role, [type(b).__name__ for b in m.content]) for m in messages] == [
        ("user", ["TextBlock"]),
        ("assistant", ["ThinkingBlock"]),
        ("assistant", ["TextBlock"]),
        ("assistant", ["TextBlock"]),
    ]
    assert messages[1].content[0] == thinking("Weighing the question")
    assert chatgpt_export.load(chatgpt_export.dump(messages)) == messages
    assert (
        chatgpt_export.dump(messages)["mapping"][  # the summary is not written as content
            next(
                k
                for k, v in chatgpt_export.dump(messages)["mapping"].items()
                if v["message"] and v["message"]["content"]["content_type"] == "thoughts"
            )
        ]["message"]["content"]["thoughts"][0]["content"]
        == ""
    )
    for name in formats.PROVIDER_FORMATS:
        dumped = formats.dump_context(name, messages, report=True)
        if name != "gemini":  # Gemini takes the recap's empty text as it is
            assert [a.kind for a in dumped.adjustments] == ["dropped_empty_message"], name
    chat = formats.dump_context("openai_chat", messages)
    assert chat == [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "<think>\nWeighing the question\n</think>"},
        {"role": "assistant", "content": "Because."},
    ]


# -- the rest of the table ---------------------------------------------------------------------


def test_a_history_starting_with_the_assistant_gets_a_user_turn_first() -> None:
    history = [
        Message(role="assistant", content=[text("Welcome back.")]),
        Message(role="user", content=[text("hi")]),
    ]
    dumped = anthropic.dump(history, report=True)
    assert dumped.payload["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": LEADING_USER_TEXT}],
    }
    assert [a.kind for a in dumped.adjustments] == ["leading_user_turn"]
    assert openai_chat.dump(history, report=True).adjustments == []


def test_an_empty_user_message_is_filled_and_an_empty_reply_left_out() -> None:
    history = [
        Message(role="user", content=[text("")]),
        Message(role="assistant", content=[text("")]),
        Message(role="user", content=[text("hello")]),
    ]
    dumped = openai_chat.dump(history, report=True)
    assert dumped.payload == [
        {"role": "user", "content": EMPTY_USER_TEXT},
        {"role": "user", "content": "hello"},
    ]
    assert [a.kind for a in dumped.adjustments] == ["filled_empty_message", "dropped_empty_message"]


def test_non_object_tool_input_and_repeated_call_ids() -> None:
    history = [
        Message(role="user", content=[text("go")]),
        Message(
            role="assistant", content=[tool_use("x", "sh", "ls -la"), tool_use("x", "sh", "ls -la")]
        ),
        Message(role="tool", content=[tool_result("x", "a b")]),
    ]
    dumped = anthropic.dump(history, report=True)
    assert dumped.payload["messages"][1]["content"] == [
        {"type": "tool_use", "id": "x", "name": "sh", "input": {"input": "ls -la"}}
    ]
    assert [a.kind for a in dumped.adjustments] == [
        "tool_input_wrapped",
        "tool_input_wrapped",
        "dropped_duplicate_call",
    ]


def test_items_only_their_provider_takes_back_are_reported_when_left_out() -> None:
    search = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
    history = [
        Message(role="user", content=[text("news?")]),
        Message(
            role="assistant",
            content=[text("Here.")],
            provider_details={"anthropic": {"blocks": [[0, search]]}},
        ),
    ]
    assert anthropic.dump(history, report=True).adjustments == []
    assert openai_chat.dump(history, report=True) == Dumped(
        [{"role": "user", "content": "news?"}, {"role": "assistant", "content": "Here."}],
        [
            Adjustment(
                kind="dropped_provider_items",
                position=1,
                detail="1 anthropic item(s) with no openai_chat form left out (server_tool_use)",
            )
        ],
    )
