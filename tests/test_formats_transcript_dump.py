"""``dump`` of the transcript importers: each writes the tool's own file, and ``load`` reads it
back to the same messages (docs/importing.md, "Export to the tool's own format")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import REALDATA
from threadline import importing
from threadline.formats import chatgpt_export, claude_code, codex, google_adk, pi
from threadline.model.content import (
    Message,
    image,
    image_url,
    text,
    thinking,
    tool_result,
    tool_use,
)

MODULES: dict[str, Any] = {
    "pi": pi,
    "claude_code": claude_code,
    "chatgpt_export": chatgpt_export,
    "codex": codex,
    "google_adk": google_adk,
}
REALDATA_DIRS = {
    "pi": "pi_session",
    "claude_code": "claude_code",
    "chatgpt_export": "chatgpt_export",
    "codex": "codex_cli",
    "google_adk": "google_adk",
}
# the name each tool gives its file on disk
FILE_NAMES = {
    "pi": "2026-01-01T00-00-00-000Z_session.jsonl",
    "claude_code": "session.jsonl",
    "chatgpt_export": "conversations.json",
    "codex": "rollout-2026-01-01T00-00-00-session.jsonl",
    "google_adk": "session.json",
}


def file_text(fmt: str, payload: Any) -> str:
    """A dump as the tool stores it: JSON lines, one JSON document, or (ChatGPT) the export's
    list of conversations."""
    if fmt == "chatgpt_export":
        payload = [payload]
    if isinstance(payload, list) and fmt != "chatgpt_export":
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in payload)
    return json.dumps(payload, ensure_ascii=False)


def round_trip(fmt: str, messages: list[Message]) -> list[Message]:
    mod = MODULES[fmt]
    loaded: list[Message] = mod.load(file_text(fmt, mod.dump(messages)))
    return loaded


def realdata_files() -> list[Any]:
    return [
        pytest.param(fmt, path, id=f"{fmt}/{path.name}")
        for fmt, folder in REALDATA_DIRS.items()
        for path in sorted((REALDATA / folder).iterdir())
    ]


@pytest.mark.parametrize(("fmt", "path"), realdata_files())
def test_a_real_transcript_loads_back_from_its_dump(fmt: str, path: Path) -> None:
    messages = MODULES[fmt].load(path)
    assert round_trip(fmt, messages) == messages


@pytest.mark.parametrize("fmt", MODULES)
def test_the_same_messages_give_the_same_file(fmt: str) -> None:
    mod = MODULES[fmt]
    first = file_text(fmt, mod.dump(HISTORY))
    assert first == file_text(
        fmt, mod.dump(msgspec.json.decode(msgspec.json.encode(HISTORY), type=list[Message]))
    )
    assert first != file_text(fmt, mod.dump(HISTORY[:-1]))


# -- a hand-made history: system prompt, text + image, signed thinking, a tool call and result

CALL_INPUT = {"path": "a.txt"}
THOUGHT = "Read the file first."
HISTORY = [
    Message(role="system", content=[text("You are terse.")]),
    Message(
        role="user",
        content=[text("What is in a.txt and this picture?"), image("iVBORw0KGgo=", "image/png")],
    ),
    Message(
        role="assistant",
        content=[
            thinking(THOUGHT, "sig-1"),
            text("Let me look."),
            tool_use("call_1", "read", CALL_INPUT),
        ],
    ),
    Message(role="tool", content=[tool_result("call_1", "hello")]),
    Message(role="assistant", content=[text("It says hello; the picture is a pixel.")]),
]
SYSTEM, ASK, REPLY, RESULT, ANSWER = HISTORY
_, SAYS, CALL = REPLY.content


def as_user(m: Message) -> Message:
    return Message(role="user", content=m.content)


def unsigned(m: Message) -> Message:
    return Message(role=m.role, content=[thinking(THOUGHT)])


def alone(m: Message, *blocks: Any) -> list[Message]:
    return [Message(role=m.role, content=[b]) for b in blocks]


def expected_pi() -> list[Message]:
    """pi keeps everything but a tool result's string content, which pi holds as text blocks."""
    return [
        SYSTEM,
        ASK,
        REPLY,
        Message(role="tool", content=[tool_result("call_1", [text("hello")])]),
        ANSWER,
    ]


def expected_claude_code() -> list[Message]:
    """Claude Code has no system or tool records: the system prompt comes back as tagged user
    text, the tool result as the user message Claude Code writes for it."""
    return [
        Message(role="user", content=[text("<system_message>\nYou are terse.\n</system_message>")]),
        ASK,
        REPLY,
        as_user(RESULT),
        ANSWER,
    ]


def expected_chatgpt_export() -> list[Message]:
    """ChatGPT holds thinking (unsigned), text and each call in messages of their own; a call's
    input is its code or text (other inputs as their JSON text); images are URLs."""
    return [
        SYSTEM,
        Message(
            role="user", content=[ASK.content[0], image_url("data:image/png;base64,iVBORw0KGgo=")]
        ),
        unsigned(REPLY),
        *alone(REPLY, SAYS),
        Message(
            role="assistant", content=[tool_use("call_1", "read", {"text": json.dumps(CALL_INPUT)})]
        ),
        RESULT,
        ANSWER,
    ]


def expected_codex() -> list[Message]:
    """The Responses API holds reasoning, text and a call as separate items, and thinking from
    elsewhere as unsigned ``<think>`` text."""
    return [SYSTEM, ASK, unsigned(REPLY), *alone(REPLY, SAYS, CALL), RESULT, ANSWER]


def expected_google_adk() -> list[Message]:
    """Gemini content has no signature for another provider's thinking and sends a function
    response as user content; every event names its author."""
    reply = Message(role="assistant", content=[thinking(THOUGHT), SAYS, CALL])
    out = [SYSTEM, ASK, reply, as_user(RESULT), ANSWER]
    return [
        Message(
            role=m.role,
            content=m.content,
            provider_details={
                "google_adk": {"author": "model" if m.role == "assistant" else "user"}
            },
        )
        for m in out
    ]


EXPECTED = {
    "pi": expected_pi,
    "claude_code": expected_claude_code,
    "chatgpt_export": expected_chatgpt_export,
    "codex": expected_codex,
    "google_adk": expected_google_adk,
}


def without_own_details(fmt: str, messages: list[Message]) -> list[Message]:
    """The messages without what ``fmt``'s loader records of the file (ChatGPT's author, content
    type…), which a hand-made message does not have."""

    def strip(obj: Any) -> Any:
        pd = {k: v for k, v in (obj.provider_details or {}).items() if k != fmt}
        return msgspec.structs.replace(obj, provider_details=pd or None)

    return [
        strip(msgspec.structs.replace(m, content=[strip(b) for b in m.content])) for m in messages
    ]


@pytest.mark.parametrize("fmt", MODULES)
def test_a_hand_made_history_comes_back_with_only_the_documented_changes(fmt: str) -> None:
    loaded = round_trip(fmt, HISTORY)
    if fmt == "chatgpt_export":
        loaded = without_own_details(fmt, loaded)
    assert loaded == EXPECTED[fmt]()


@pytest.mark.parametrize("fmt", MODULES)
def test_a_history_read_from_a_dump_survives_another_dump(fmt: str) -> None:
    once = round_trip(fmt, HISTORY)
    assert round_trip(fmt, once) == once


# -- importing the written file --------------------------------------------------------------


def write_dump(fmt: str, messages: list[Message], folder: Path) -> Path:
    path = folder / FILE_NAMES[fmt]
    path.write_text(file_text(fmt, MODULES[fmt].dump(messages)), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", MODULES)
def test_a_dumped_file_imports_as_a_session_with_the_same_context(
    fmt: str, jsonl_store: Any, tmp_path: Path
) -> None:
    path = write_dump(fmt, HISTORY, tmp_path)
    assert importing.detect(path) == fmt
    (session,) = importing.import_path(jsonl_store, fmt, path)
    assert list(session.context().messages) == MODULES[fmt].load(path)
    assert list(jsonl_store.open(session.id).context().messages) == round_trip(fmt, HISTORY)


@pytest.mark.parametrize(
    ("fmt", "path"), [p for p in realdata_files() if p.values[1].stat().st_size < 200_000]
)
def test_a_real_transcript_dumped_to_disk_imports_with_its_context(
    fmt: str, path: Path, jsonl_store: Any, tmp_path: Path
) -> None:
    messages = MODULES[fmt].load(path)
    (session,) = importing.import_path(jsonl_store, fmt, write_dump(fmt, messages, tmp_path))
    assert list(session.context().messages) == messages
