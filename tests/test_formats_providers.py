"""Provider formats: exact dumps, what real payloads load into, cross-provider dumps, validators."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from conftest import REALDATA
from threadline import formats
from threadline.errors import NotFoundError, UserError
from threadline.formats import anthropic, bedrock, gemini, openai_chat, openai_responses
from threadline.model.content import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    text,
    thinking,
    tool_result,
    tool_use,
)


def recorded(folder: str, test: str, n: int = -1) -> dict[str, Any]:
    """Request body ``n`` of a recorded cassette."""
    path = next((REALDATA / folder).glob(f"*__{test}.yaml"))
    bodies = []
    for interaction in yaml.safe_load(path.read_text())["interactions"]:
        req = interaction["request"]
        if (
            "generativelanguage" in req["uri"]
            or "bedrock" in req["uri"]
            or "anthropic" in req["uri"]
            or "openai" in req["uri"]
        ):
            body = req.get("parsed_body") or json.loads(req["body"])
            bodies.append(body)
    return bodies[n]  # type: ignore[no-any-return]


HISTORY = [
    Message(role="system", content=[text("Be brief.")]),
    Message(role="compactionSummary", content=[text("Earlier: user asked for files.")]),
    Message(role="user", content=[text("List files")]),
    Message(
        role="assistant",
        content=[
            thinking("need ls", signature="sig1"),
            text("Listing."),
            tool_use("t1", "bash", {"cmd": "ls"}),
        ],
    ),
    Message(role="tool", content=[tool_result("t1", "a.txt")]),
    Message(role="assistant", content=[text("One file: a.txt")]),
]
SUMMARY = "<compaction_summary>\nEarlier: user asked for files.\n</compaction_summary>"

EXPECTED = {
    "openai_chat": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": SUMMARY},
        {"role": "user", "content": "List files"},
        {
            "role": "assistant",
            "content": "<think>\nneed ls\n</think>\n\nListing.",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "t1",
                    "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a.txt"},
        {"role": "assistant", "content": "One file: a.txt"},
    ],
    "openai_responses": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": SUMMARY},
        {"role": "user", "content": "List files"},
        {"role": "assistant", "content": "<think>\nneed ls\n</think>"},
        {"role": "assistant", "content": "Listing."},
        {"type": "function_call", "call_id": "t1", "name": "bash", "arguments": '{"cmd":"ls"}'},
        {"type": "function_call_output", "call_id": "t1", "output": "a.txt"},
        {"role": "assistant", "content": "One file: a.txt"},
    ],
    "anthropic": {
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": SUMMARY},
                    {"type": "text", "text": "List files"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "need ls", "signature": "sig1"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "One file: a.txt"}]},
        ],
    },
    "gemini": {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": SUMMARY}, {"text": "List files"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "need ls", "thought": True},
                    {"text": "Listing."},
                    {"functionCall": {"id": "t1", "name": "bash", "args": {"cmd": "ls"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "t1",
                            "name": "bash",
                            "response": {"output": "a.txt"},
                        }
                    }
                ],
            },
            {"role": "model", "parts": [{"text": "One file: a.txt"}]},
        ],
    },
    "bedrock": {
        "system": [{"text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"text": SUMMARY}, {"text": "List files"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "need ls", "signature": "sig1"}
                        }
                    },
                    {"text": "Listing."},
                    {"toolUse": {"toolUseId": "t1", "name": "bash", "input": {"cmd": "ls"}}},
                ],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "a.txt"}]}}],
            },
            {"role": "assistant", "content": [{"text": "One file: a.txt"}]},
        ],
    },
}


@pytest.mark.parametrize("name", formats.PROVIDER_FORMATS)
def test_a_small_history_dumps_to_exactly_the_documented_payload(name: str) -> None:
    assert formats.dump_context(name, HISTORY) == EXPECTED[name]


@pytest.mark.parametrize("name", ["anthropic", "gemini", "bedrock", "openai_responses"])
def test_the_summary_comes_back_as_a_compaction_summary_message(name: str) -> None:
    back = formats.get(name).load(EXPECTED[name])
    assert back[1] == Message(
        role="compactionSummary", content=[text("Earlier: user asked for files.")]
    )
    assert back[2] == Message(role="user", content=[text("List files")])


# -- real payloads: thinking and images against the source ---------------------------------


def test_anthropic_thinking_keeps_its_signature() -> None:
    body = recorded("api_anthropic_messages", "test_anthropic_model_thinking_part")
    source = body["messages"][1]["content"][0]
    block = anthropic.load(body["messages"])[1].content[0]
    assert isinstance(block, ThinkingBlock)
    assert (block.thinking.content, block.thinking.signature) == (
        source["thinking"],
        source["signature"],
    )


def test_anthropic_redacted_thinking_keeps_its_data_as_the_signature() -> None:
    body = recorded("api_anthropic_messages", "test_anthropic_model_thinking_part_redacted")
    source = body["messages"][1]["content"][0]
    block = anthropic.load(body["messages"])[1].content[0]
    assert isinstance(block, ThinkingBlock)
    assert (block.thinking.redacted, block.thinking.signature) == (True, source["data"])


def test_anthropic_server_tool_blocks_ride_in_provider_details_at_their_index() -> None:
    body = recorded("api_anthropic_messages", "test_anthropic_web_search_tool")
    assistant = anthropic.load(body["messages"])[1]
    kept = assistant.provider_details["anthropic"]["blocks"]  # type: ignore[index]
    assert [(i, b["type"]) for i, b in kept] == [
        (1, "server_tool_use"),
        (2, "web_search_tool_result"),
    ]
    assert [type(b).__name__ for b in assistant.content[:2]] == ["ThinkingBlock", "TextBlock"]


def test_anthropic_url_image_loads_as_a_url_image() -> None:
    body = recorded("api_anthropic_messages", "test_image_url_input")
    block = anthropic.load(body)[0].content[1]
    assert isinstance(block, ImageBlock)
    assert (block.image.source.type, block.image.source.data) == (
        "url",
        body["messages"][0]["content"][1]["source"]["url"],
    )


def test_gemini_thought_part_and_signature() -> None:
    body = recorded("api_gemini_contents", "test_google_model_thinking_part")
    parts = body["contents"][1]["parts"]
    model = gemini.load(body)[2]
    thought, answer = model.content
    assert isinstance(thought, ThinkingBlock) and isinstance(answer, TextBlock)
    assert thought.thinking.content == parts[0]["text"]
    assert thought.thinking.signature is None
    assert answer.provider_details == {"gemini": {"thoughtSignature": parts[1]["thoughtSignature"]}}


def test_gemini_inline_image_keeps_its_bytes_and_type() -> None:
    body = recorded("api_gemini_contents", "test_google_model_image_url_input")
    inline = body["contents"][0]["parts"][1]["inlineData"]
    block = gemini.load(body)[1].content[1]
    assert isinstance(block, ImageBlock)
    assert (block.image.source.media_type, block.image.source.data) == (
        inline["mimeType"],
        inline["data"],
    )


def test_gemini_function_response_value_becomes_the_result_text() -> None:
    body = recorded("api_gemini_contents", "test_google_tool_output")
    result = gemini.load(body)[2].content[0]
    assert isinstance(result, ToolResultBlock)
    assert result.tool_result.content == "Mexico"


def test_gemini_calls_without_ids_get_ids_their_responses_share() -> None:
    body = recorded("api_openai_chat", "test_multiple_agent_tool_calls", 1)
    call, result = gemini.load(body)[1:]
    assert call.tool_uses[0].id == result.tool_results[0].tool_use_id == "gemini_call_1"
    assert gemini.dump(gemini.load(body)) == {"contents": body["contents"]}


def test_bedrock_reasoning_and_tool_result_image() -> None:
    body = recorded("api_bedrock_converse", "test_bedrock_anthropic_tool_with_thinking")
    rt = body["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]
    block = bedrock.load(body)[1].content[0]
    assert isinstance(block, ThinkingBlock)
    assert (block.thinking.content, block.thinking.signature) == (rt["text"], rt["signature"])
    body = recorded("api_bedrock_converse", "test_bedrock_mistral_tool_return_image_accepted")
    img = body["messages"][4]["content"][1]["image"]
    loaded = bedrock.load(body)[4].content[1]
    assert isinstance(loaded, ImageBlock)
    assert (loaded.image.source.media_type, loaded.image.source.data) == (
        "image/jpeg",
        img["source"]["bytes"],
    )


def test_bedrock_error_status_loads_as_an_error_result() -> None:
    body = recorded("api_bedrock_converse", "test_bedrock_model_retry")
    result = bedrock.load(body)[3].content[0]
    assert isinstance(result, ToolResultBlock)
    assert result.tool_result.is_error is True


def test_responses_reasoning_keeps_encrypted_content_and_summary() -> None:
    body = recorded("api_openai_responses", "test_openai_responses_thinking_with_tool_calls")
    item = body["input"][1]
    assistant = openai_responses.load(body)[1]
    block = assistant.content[0]
    assert isinstance(block, ThinkingBlock)
    assert block.thinking.content == "\n\n".join(s["text"] for s in item["summary"])
    kept = block.provider_details["openai_responses"]["reasoning"]  # type: ignore[index]
    assert (kept["id"], kept["encrypted_content"]) == (item["id"], item["encrypted_content"])
    assert isinstance(assistant.content[1], ToolUseBlock)


def test_responses_built_in_items_stay_verbatim_in_the_assistant_message() -> None:
    body = recorded("api_openai_responses", "test_openai_responses_model_web_search_tool")
    assistant = openai_responses.load(body)[1]
    kept = assistant.provider_details["openai_responses"]["items"]  # type: ignore[index]
    assert kept == [[1, body["input"][2]]]
    assert [type(b).__name__ for b in assistant.content] == [
        "ThinkingBlock",
        "ThinkingBlock",
        "TextBlock",
    ]


def test_chat_think_sections_load_as_thinking_blocks() -> None:
    body = recorded("api_openai_chat", "test_openai_model_thinking_part")
    source = body["messages"][1]["content"]
    assistant = openai_chat.load(body)[1]
    kinds = [type(b).__name__ for b in assistant.content]
    assert kinds == ["ThinkingBlock", "ThinkingBlock", "TextBlock"]
    assert source.endswith(assistant.content[2].text.content)  # type: ignore[union-attr]


def test_chat_developer_message_loads_as_system_and_dumps_back_as_developer() -> None:
    payload = [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Hi"},
    ]
    loaded = openai_chat.load(payload)
    assert loaded[0].role == "system"
    assert openai_chat.dump(loaded) == payload
    assert anthropic.dump(loaded)["system"] == "Answer in French."


# -- cross-provider -------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["openai_chat", "openai_responses", "gemini", "bedrock"])
@pytest.mark.parametrize(
    "source",
    [
        "test_multiple_parallel_tool_calls",
        "test_anthropic_tool_with_thinking",
        "test_anthropic_web_search_tool",
    ],
)
def test_an_anthropic_history_dumps_validly_to_every_provider_with_tool_pairs_intact(
    source: str, target: str
) -> None:
    body = recorded("api_anthropic_messages", source)
    history = anthropic.load({k: body[k] for k in ("system", "messages") if k in body})
    if source == "test_anthropic_tool_with_thinking":  # end on the answered call
        assert isinstance(history[-1].content[0], ToolResultBlock)
    module = formats.get(target)
    payload = formats.dump_context(target, history)
    back = module.load(payload)
    calls = [(u.id, u.name) for m in history for u in m.tool_uses]
    assert [(u.id, u.name) for m in back for u in m.tool_uses] == calls
    assert [r.tool_use_id for m in back for r in m.tool_results] == [
        r.tool_use_id for m in history for r in m.tool_results
    ]


def test_parallel_results_become_one_gemini_turn_named_after_their_calls() -> None:
    body = recorded("api_anthropic_messages", "test_multiple_parallel_tool_calls")
    payload = gemini.dump(anthropic.load(body))
    responses = payload["contents"][-1]["parts"]
    assert [r["functionResponse"]["name"] for r in responses] == ["retrieve_entity_info"] * 4
    assert responses[0]["functionResponse"]["response"] == {"output": "alice is bob's wife"}


# -- shaping --------------------------------------------------------------------------------


def test_consecutive_user_messages_merge_into_one_turn_with_tool_results_first() -> None:
    history = [
        Message(role="user", content=[text("go")]),
        Message(role="assistant", content=[tool_use("a", "f")]),
        Message(role="user", content=[text("also this")]),
        Message(role="tool", content=[tool_result("a", "done")]),
    ]
    assert anthropic.dump(history)["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "done"},
            {"type": "text", "text": "also this"},
        ],
    }
    assert bedrock.dump(history)["messages"][2]["content"][0] == {
        "toolResult": {"toolUseId": "a", "content": [{"text": "done"}]}
    }


def test_a_system_message_mid_conversation_becomes_wrapped_user_text_and_comes_back() -> None:
    history = [
        Message(role="user", content=[text("hi")]),
        Message(role="assistant", content=[text("hello")]),
        Message(role="system", content=[text("Digest: greetings exchanged")]),
        Message(role="user", content=[text("bye")]),
    ]
    payload = anthropic.dump(history)
    assert "system" not in payload
    assert payload["messages"][2]["content"][0] == {
        "type": "text",
        "text": "<system_message>\nDigest: greetings exchanged\n</system_message>",
    }
    assert anthropic.load(payload) == history
    assert openai_chat.dump(history)[2] == {
        "role": "system",
        "content": "Digest: greetings exchanged",
    }


def test_a_wrapped_role_with_several_blocks_is_wrapped_by_tag_blocks() -> None:
    m = Message(role="bashExecution", content=[text("$ ls"), text("a.txt")])
    payload = anthropic.dump([m])
    assert payload["messages"][0]["content"] == [
        {"type": "text", "text": "<bash_execution>"},
        {"type": "text", "text": "$ ls"},
        {"type": "text", "text": "a.txt"},
        {"type": "text", "text": "</bash_execution>"},
    ]
    assert anthropic.load(payload) == [m]


def test_images_in_a_tool_result_follow_the_chat_tool_message_in_a_user_message() -> None:
    from threadline.model.content import image

    history = [
        Message(role="user", content=[text("shot")]),
        Message(role="assistant", content=[tool_use("s", "screenshot")]),
        Message(role="user", content=[tool_result("s", [text("taken"), image("AAAA")])]),
    ]
    assert openai_chat.dump(history)[2:] == [
        {"role": "tool", "tool_call_id": "s", "content": [{"type": "text", "text": "taken"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image(s) returned by tool call s:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]


# -- validators -----------------------------------------------------------------------------


def test_anthropic_validator_lists_every_broken_rule() -> None:
    payload = {
        "system": "",
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hm"},
                    {"type": "tool_result", "tool_use_id": "y"},
                ],
            },
            {"role": "user", "content": []},
        ],
    }
    with pytest.raises(UserError) as err:
        anthropic.validate(payload)
    assert str(err.value) == (
        "anthropic payload breaks 7 rule(s): "
        "(1) system: must be a non-empty string or a list of text blocks; "
        "(2) messages[1].content[1]: tool_result blocks must come before other content in a "
        "user message; "
        "(3) messages[2]: empty content; "
        "(4) messages[0]: the first message must have role 'user', not 'assistant'; "
        "(5) messages[2]: two 'user' messages in a row; roles must alternate; "
        "(6) messages[1]: tool result 'y' does not answer a tool call of the turn right before "
        "it; "
        "(7) messages[0]: tool call 'x' is not answered in the next turn; "
        "fix the history or dump it with threadline.formats.anthropic.dump"
    )


def test_chat_validator_requires_tool_messages_right_after_the_call() -> None:
    payload = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{"}}
            ],
        },
        {"role": "user", "content": "wait"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    with pytest.raises(UserError) as err:
        openai_chat.validate(payload)
    assert str(err.value) == (
        "openai_chat payload breaks 3 rule(s): "
        "(1) messages[1].tool_calls[0]: function.arguments is not a JSON string; "
        "(2) messages[1].tool_calls[0]: tool call 'c1' is not answered before messages[2]; "
        "(3) messages[3]: tool message 'c1' answers no tool call of the assistant message "
        "right before it; "
        "fix the history or dump it with threadline.formats.openai_chat.dump"
    )


def test_responses_validator_wants_every_call_answered() -> None:
    payload = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "d", "output": "x"},
        {"type": "reasoning", "summary": []},
    ]
    with pytest.raises(UserError) as err:
        openai_responses.validate(payload)
    assert str(err.value) == (
        "openai_responses payload breaks 3 rule(s): "
        "(1) input[2]: function_call_output 'd' answers no earlier function_call; "
        "(2) input[3]: reasoning item without id; "
        "(3) input[1]: function_call 'c' has no function_call_output; "
        "fix the history or dump it with threadline.formats.openai_responses.dump"
    )


def test_gemini_validator_wants_names_on_function_responses_and_alternation() -> None:
    payload = {
        "contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "c", "name": "f", "args": {}}}]},
            {"role": "model", "parts": [{"functionResponse": {"id": "c", "response": {}}}]},
        ]
    }
    with pytest.raises(UserError) as err:
        gemini.validate(payload)
    assert str(err.value) == (
        "gemini payload breaks 4 rule(s): "
        "(1) contents[2].parts[0]: a functionResponse must be in a user turn; "
        "(2) contents[2].parts[0]: functionResponse without name; "
        "(3) contents[2]: two 'model' messages in a row; roles must alternate; "
        "(4) contents[1]: tool call 'c' is not answered in the next turn; "
        "fix the history or dump it with threadline.formats.gemini.dump"
    )


def test_bedrock_validator_wants_one_key_blocks_and_non_blank_text() -> None:
    payload = {
        "messages": [{"role": "user", "content": [{"text": " "}, {"text": "a", "image": {}}]}]
    }
    with pytest.raises(UserError) as err:
        bedrock.validate(payload)
    assert str(err.value) == (
        "bedrock payload breaks 2 rule(s): "
        "(1) messages[0].content[0]: blank text block; "
        "(2) messages[0].content[1]: a content block must be an object with exactly one key; "
        "fix the history or dump it with threadline.formats.bedrock.dump"
    )


def test_dump_context_answers_a_trailing_call_and_strict_refuses_it() -> None:
    history = [
        Message(role="user", content=[text("q")]),
        Message(role="assistant", content=[tool_use("c", "f")]),
    ]
    with pytest.raises(
        UserError,
        match=r"\[1\] answered_dangling_call: tool call 'c' \(f\) "
        "has no result",
    ):
        formats.dump_context("anthropic", history, strict=True)
    payload = formats.dump_context("anthropic", history)
    assert payload["messages"][-1]["content"][0]["tool_use_id"] == "c"
    assert payload["messages"][-1]["content"][0]["is_error"] is True


# -- registry -------------------------------------------------------------------------------


def test_names_lists_the_provider_formats_first() -> None:
    assert formats.names()[:5] == [
        "openai_chat",
        "openai_responses",
        "anthropic",
        "gemini",
        "bedrock",
    ]
    assert formats.get("gemini") is gemini


def test_an_unknown_format_is_refused_with_the_choices() -> None:
    with pytest.raises(NotFoundError, match=r"Unknown format 'claude'; choose one of openai_chat"):
        formats.get("claude")
    with pytest.raises(NotFoundError, match=r"'pi' is not a provider format"):
        formats.dump_context("pi", [])


def test_load_names_the_bad_input() -> None:
    with pytest.raises(UserError, match=r"messages\[0\]: role 'robot' is not an Anthropic role"):
        anthropic.load({"messages": [{"role": "robot", "content": "x"}]})
    with pytest.raises(UserError, match=r"Chat Completions messages must be a list, got str"):
        openai_chat.load("hello")


# -- a session's context --------------------------------------------------------------------


def test_a_session_context_with_summaries_and_a_digest_dumps_to_every_provider() -> None:
    import threadline as tl

    store = tl.open_store("memory://")
    s = store.create()
    s.append_message("user", "first question")
    s.append_message("assistant", [text("checking"), tool_use("c1", "read", {"path": "a"})])
    read = s.append_message("tool", [tool_result("c1", "contents")])
    answered = s.append_message("assistant", "answer one")
    s.append_message("user", "second question")
    s.branch_with_summary(answered, "tried a second question")
    s.append_message("user", "third question")
    s.append_message("assistant", "answer three")
    s.append_message("user", "fourth question")
    s.append_message("assistant", "answer four")
    s.digest(5, 6, "third exchange")
    messages = list(s.context().messages)
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "branchSummary",
        "system",
        "user",
        "assistant",
    ]
    for name in formats.PROVIDER_FORMATS:
        back = formats.get(name).load(formats.dump_context(name, messages))
        assert [m.role for m in back if m.role in ("branchSummary", "system")] == [
            "branchSummary",
            "system",
        ], name
    assert anthropic.load(anthropic.dump(messages))[4:] == messages[4:]
    assert read in s.context().view.ids()


def test_gemini_accepts_the_same_id_less_function_called_again_in_a_later_turn() -> None:
    call = {"functionCall": {"name": "transfer", "args": {}}}
    answer = {"functionResponse": {"name": "transfer", "response": {"ok": True}}}
    payload = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [answer]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [answer]},
        ]
    }
    gemini.validate(payload)  # no "used twice": id-less calls pair by position
    payload["contents"].pop()
    with pytest.raises(UserError, match=r"tool call 'transfer#1@3' has no result"):
        gemini.validate(payload)
