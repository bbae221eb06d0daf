"""Real recorded provider requests (pydantic-ai VCR cassettes) round-trip through the formats.

Every request body of every cassette in ``realdata/api_*`` is routed by its URL to the format
that speaks it; ``dump(load(payload))`` must give the payload back and pass the validator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
