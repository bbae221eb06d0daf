"""Every real transcript and recorded payload, sent to every provider format with the default
send policy (docs/formats.md, "Send policy"): the payload passes that provider's validator, every
user and assistant text of the source is in it, and every change is reported."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import REALDATA
from test_formats_realdata import REQUESTS, conversation_part
from threadline import formats, importing
from threadline.errors import UserError
from threadline.formats import openai_responses, pi
from threadline.model.content import Message, TextBlock
from threadline.model.pairing import INTERRUPTED

TRANSCRIPT_DIRS = {
    "claude_code": "claude_code",
    "pi_session": "pi",
    "chatgpt_export": "chatgpt_export",
    "codex_cli": "codex",
    "google_adk": "google_adk",
}


def _sources() -> list[tuple[str, str, Any]]:
    """(label, kind, how to load): every transcript file, every recorded request, every
    Agents SDK run-state batch."""
    found: list[tuple[str, str, Any]] = []
    for folder, fmt in TRANSCRIPT_DIRS.items():
        for path in sorted((REALDATA / folder).iterdir()):
            found.append((f"{folder}/{path.name}", fmt, path))
    for label, _, name, body in REQUESTS:
        found.append((f"api/{label}", name, body))
    for path in sorted((REALDATA / "openai_agents_sdk").iterdir()):
        found.append((f"agents_sdk/{path.name}", "agents_sdk", path))
    return found


SOURCES = _sources()


@cache
def histories(label: str) -> list[list[Message]]:
    """The histories a source holds: each imported session's context, or the loaded payload."""
    _, kind, src = next(s for s in SOURCES if s[0] == label)
    if kind in formats.PROVIDER_FORMATS:
        return [formats.get(kind).load(conversation_part(kind, src))]
    if kind == "agents_sdk":
        state = json.loads(Path(src).read_text(encoding="utf-8"))
        return [openai_responses.load([i["raw_item"] for i in state["generated_items"]])]
    if kind == "pi" and Path(src).suffix == ".json":  # one pi message, not a session
        return [pi.load(src)]
    return [importing.messages_of(d) for d in importing.prepare(kind, src)]


def _strings(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    return out


def _texts(messages: list[Message]) -> list[str]:
    return [
        b.text.content
        for m in messages
        if m.role in ("user", "assistant")
        for b in m.content
        if isinstance(b, TextBlock) and b.text.content.strip()
    ]


def test_the_sources_cover_every_real_data_folder() -> None:
    folders = {s[0].split("/")[0] for s in SOURCES}
    assert folders == {*TRANSCRIPT_DIRS, "api", "agents_sdk"}
    assert len(SOURCES) * len(formats.PROVIDER_FORMATS) >= 168


@pytest.mark.parametrize("name", formats.PROVIDER_FORMATS)
@pytest.mark.parametrize("label", [s[0] for s in SOURCES])
def test_a_real_history_dumps_valid_with_its_text_and_every_change_reported(
    label: str, name: str
) -> None:
    module = formats.get(name)
    for messages in histories(label):
        dumped = formats.dump_context(name, messages, report=True)  # validates
        strings = _strings(dumped.payload, [])
        exact = set(strings)
        joined = "\x00".join(strings)
        lost = [t for t in _texts(messages) if t not in exact and t not in joined]
        assert lost == []
        kinds = [a.kind for a in dumped.adjustments]
        if not kinds:
            assert dumped.payload == module.shape(messages)
            module.dump(messages, strict=True)
        else:
            with pytest.raises(UserError, match=r"adjustment\(s\) before it can be sent"):
                module.dump(messages, strict=True)
        # each synthetic result is one reported answer
        interrupted = sum(s.count(INTERRUPTED) for s in strings)
        assert interrupted == kinds.count("answered_dangling_call")
