"""Real recorded provider requests (pydantic-ai VCR cassettes) round-trip through the formats.

Every request body of every cassette in ``realdata/api_*`` is routed by its URL to the format
that speaks it; ``dump(load(payload))`` must give the payload back and pass the validator.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from conftest import REALDATA
from threadline import formats

CASSETTES = sorted(REALDATA.glob("api_*/*.yaml"))


def _format_for(uri: str) -> str | None:
    if "chat/completions" in uri:
        return "openai_chat"
    if "api.openai.com/v1/responses" in uri:
        return "openai_responses"
    if "api.anthropic.com" in uri:
        return "anthropic"
    if "generativelanguage.googleapis.com" in uri:
        return "gemini"
    if "bedrock-runtime" in uri:
        return "bedrock"
    return None  # e.g. the image download recorded beside a Gemini call


_CONVERSATION_KEYS = {
    "openai_chat": ("messages",),
    "openai_responses": ("input",),
    "anthropic": ("system", "messages"),
    "gemini": ("systemInstruction", "system_instruction", "contents"),
    "bedrock": ("system", "messages"),
}


def conversation_part(name: str, body: dict[str, Any]) -> Any:
    """The part of a request body a format's ``dump`` produces."""
    keys = _CONVERSATION_KEYS[name]
    if name == "openai_chat":
        return body["messages"]
    if name == "openai_responses":
        return body["input"]
    part = {k: body[k] for k in keys if k in body}
    if name == "bedrock" and part.get("system") == []:
        del part["system"]  # normalization: dump leaves out an empty system list
    return part


def requests() -> list[tuple[str, int, str, Any]]:
    found = []
    for path in CASSETTES:
        recorded = yaml.safe_load(path.read_text())
        for n, interaction in enumerate(recorded["interactions"]):
            req = interaction["request"]
            name = _format_for(req["uri"])
            if name is None:
                continue
            body = req.get("parsed_body")
            if body is None:
                body = json.loads(req["body"])
            found.append((f"{path.stem.split('__')[-1]}[{n}]", n, name, body))
    return found


REQUESTS = requests()
IDS = [r[0] for r in REQUESTS]


def test_every_cassette_has_a_request_with_a_known_format() -> None:
    assert {p.stem for p in CASSETTES} == {
        p.stem for p in CASSETTES if any(r[0].startswith(p.stem.split("__")[-1]) for r in REQUESTS)
    }
    assert len(CASSETTES) == 27


@pytest.mark.parametrize(("label", "n", "name", "body"), REQUESTS, ids=IDS)
def test_dump_of_load_gives_the_recorded_request_back(
    label: str, n: int, name: str, body: dict[str, Any]
) -> None:
    module = formats.get(name)
    payload = conversation_part(name, body)
    messages = module.load(payload)
    assert module.dump(messages) == payload
    module.validate(payload)
    assert module.load(module.dump(messages)) == messages


def _source(name: str) -> Path:
    return next(p for p in CASSETTES if p.stem.endswith(name))


def _last_request(name: str) -> Any:
    label = _source(name).stem.split("__")[-1]
    matching = [r for r in REQUESTS if r[0].startswith(label)]
    return matching[-1][2], conversation_part(matching[-1][2], matching[-1][3])


# -- responses: the recorded answer is what the next request sends back ---------------------

# pairs where the client (pydantic-ai) rewrote the answer before sending it back on purpose
_REWRITTEN = {
    # a non-Claude model's reasoning is replayed as "<think>" text, not as reasoningContent
    "test_bedrock_moonshotai_tool_call",
    # the test edits the history between the two requests
    "test_openai_responses_thinking_with_modified_history",
}


def _exchanges() -> list[tuple[str, str, Any, Any, Any]]:
    """(label, format, request i, response i, request i+1) for consecutive same-format calls."""
    found = []
    for path in CASSETTES:
        label = path.stem.split("__")[-1]
        calls: list[tuple[str, Any, Any] | None] = []
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            req, resp = interaction["request"], interaction["response"]
            name = _format_for(req["uri"])
            if name is None or req["uri"].endswith("/compact"):
                calls.append(None)  # breaks the chain: the next request starts afresh
                continue
            body = req.get("parsed_body") or json.loads(req["body"])
            answer = resp.get("parsed_body")
            if answer is None and isinstance(resp.get("body"), dict):
                answer = json.loads(resp["body"]["string"])
            calls.append((name, body, answer))
        for n, (first, second) in enumerate(itertools.pairwise(calls)):
            if first is None or second is None or label in _REWRITTEN:
                continue
            (name, body, answer), (after, nxt, _) = first, second
            if name == after:
                found.append((f"{label}[{n}]", name, body, answer, nxt))
    return found


EXCHANGES = _exchanges()


def _content(message: Any, ids: dict[str, str]) -> Any:
    """A message's blocks without provider leftovers, tool ids renamed through ``ids``."""
    blocks = msgspec.to_builtins(message.content)
    for b in blocks:
        b.pop("provider_details", None)
        if b["type"] == "tool_use":
            b["tool_use"]["id"] = ids.get(b["tool_use"]["id"], b["tool_use"]["id"])
    return blocks


def test_there_are_recorded_exchanges_of_every_provider_format() -> None:
    assert sorted({e[1] for e in EXCHANGES}) == sorted(formats.PROVIDER_FORMATS)


@pytest.mark.parametrize(
    ("label", "name", "body", "answer", "nxt"), EXCHANGES, ids=[e[0] for e in EXCHANGES]
)
def test_a_loaded_response_is_the_message_the_next_request_sends_back(
    label: str, name: str, body: Any, answer: Any, nxt: Any
) -> None:
    module = formats.get(name)
    before = module.load(conversation_part(name, body))
    after = module.load(conversation_part(name, nxt))
    message = module.load_response(answer)
    assert message.role == "assistant"
    assert message.usage is not None and message.usage.total > 0
    assert message.stop_reason
    replayed = after[len(before)]
    # Gemini calls without ids get fresh ids on load; the client chose its own
    ids = {
        u.id: r.id
        for u, r in zip(message.tool_uses, replayed.tool_uses, strict=False)
        if u.id.startswith("gemini_call_")
    }
    assert _content(message, ids) == _content(replayed, {})


def _with_unknown_fields(name: str, payload: Any) -> Any:
    """The payload with an unknown field added to every message/item and every block/part."""
    payload = json.loads(json.dumps(payload))
    if name in ("openai_chat", "openai_responses"):
        messages = payload
    else:
        messages = payload["contents" if name == "gemini" else "messages"]
    for m in messages:
        m["x_unknown"] = {"kept": True}
        content = m.get("parts" if name == "gemini" else "content")
        for block in content if isinstance(content, list) else []:
            block["x_unknown"] = [1, 2]
        for call in m.get("tool_calls") or []:
            call["x_unknown"] = "call"
    return payload


@pytest.mark.parametrize(("label", "n", "name", "body"), REQUESTS, ids=IDS)
def test_unknown_fields_on_messages_and_blocks_ride_along(
    label: str, n: int, name: str, body: dict[str, Any]
) -> None:
    module = formats.get(name)
    payload = _with_unknown_fields(name, conversation_part(name, body))
    assert module.dump(module.load(payload)) == payload
