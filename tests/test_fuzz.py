"""Fuzzing in the suite (issue 13 item 8): mutated real files through the JSONL loader, every
importer and every provider format let only threadline errors escape. The mutation engine and
targets are bench/fuzz.py's, which runs the same for millions of cases; here hypothesis drives a
few thousand, and shrinks any failure to a small reproducer."""

from __future__ import annotations

import contextlib
import importlib.util
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline import formats, importing
from threadline.errors import StoreError, ThreadlineError, UserError

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fuzz", ROOT / "bench" / "fuzz.py")
assert _spec is not None and _spec.loader is not None
fuzz: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

FAST = settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
IMPORTER_SEEDS = fuzz.importer_seeds()
PROVIDER_SEEDS = fuzz.provider_seeds()
LOADER_SEED = fuzz.loader_seed()


def only_threadline_errors(fn: Any, arg: Any) -> None:
    """Run one case: a threadline error is an answer; anything else fails the test."""
    with contextlib.suppress(ThreadlineError):
        fn(arg)


@FAST
@given(rng=st.randoms(use_true_random=False))
def test_the_jsonl_loader_lets_only_threadline_errors_escape(rng: random.Random) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        only_threadline_errors(fuzz.LoaderTarget(Path(tmp)), fuzz.mutate_bytes(rng, LOADER_SEED))


@pytest.mark.parametrize("fmt", sorted(IMPORTER_SEEDS))
@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(rng=st.randoms(use_true_random=False))
def test_every_importer_lets_only_threadline_errors_escape(fmt: str, rng: random.Random) -> None:
    seed = rng.choice(IMPORTER_SEEDS[fmt])
    only_threadline_errors(fuzz.importer_target(fmt), fuzz.mutate_bytes(rng, seed))


@pytest.mark.parametrize("fmt", formats.PROVIDER_FORMATS)
@settings(
    max_examples=250, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(rng=st.randoms(use_true_random=False))
def test_every_provider_format_lets_only_threadline_errors_escape(
    fmt: str, rng: random.Random
) -> None:
    payload = msgspec.json.decode(msgspec.json.encode(rng.choice(PROVIDER_SEEDS[fmt])))
    for _ in range(rng.randint(1, 4)):
        payload = fuzz.mutate_value(rng, payload)
    only_threadline_errors(fuzz.provider_target(fmt), payload)


PLACE = re.compile(r"(?:^|: )(?:line \d+|lines \d+-\d+|at \$)")


@pytest.mark.parametrize("fmt", sorted(IMPORTER_SEEDS))
@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(rng=st.randoms(use_true_random=False))
def test_every_importer_error_names_the_file_and_the_place(fmt: str, rng: random.Random) -> None:
    # issue 13: what escapes an import (read, check, write) is a UserError/StoreError whose
    # message starts with the file's name and says where: a line, or a JSON path
    name = f"mutated-{fmt}.data"
    data = fuzz.mutate_bytes(rng, rng.choice(IMPORTER_SEEDS[fmt]))
    try:
        drafts = importing.prepare(fmt, data, name=name)
        importing.write(tl.open_store("memory://"), drafts)
    except (UserError, StoreError) as exc:
        message = str(exc)
        assert message.startswith(f"{name}: "), message
        assert PLACE.search(message) or f"{name}: the file is empty" in message, message


def test_a_shape_no_check_foresaw_names_the_line_of_a_jsonl_transcript() -> None:
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "summary", "summary": "s", "leafUuid": {"not": "a string"}},
    ]
    data = b"\n".join(msgspec.json.encode(x) for x in lines)
    with pytest.raises(UserError) as caught:
        importing.prepare("claude_code", data, name="t.jsonl")
    assert str(caught.value).startswith(
        "t.jsonl: line 2 (claude_code): malformed input (TypeError in _build: "
    )


def test_an_export_error_names_the_json_path_of_the_node() -> None:
    conv = {
        "title": "x",
        "mapping": {
            "root": {"id": "root", "parent": None, "children": ["n-1"], "message": None},
            "n-1": {
                "id": "n-1",
                "parent": "root",
                "children": [],
                "message": {"author": {"role": "user"}, "content": "a string"},
            },
        },
    }
    with pytest.raises(UserError) as caught:
        importing.prepare("chatgpt_export", msgspec.json.encode([conv, conv]), name="c.json")
    assert str(caught.value) == (
        'c.json: at $[0].mapping["n-1"]: the node\'s message has no content object'
    )


def test_invalid_json_in_a_whole_file_names_the_line_and_column() -> None:
    data = b'[\n {"role": "user", "content": "hi"},\n {"role": "user" "content": "x"}\n]'
    with pytest.raises(UserError) as caught:
        importing.prepare("chat_history", data, name="h.json")
    assert str(caught.value) == (
        "h.json: line 3, column 18: invalid JSON (JSON is malformed: expected ',' or '}')"
    )
    with pytest.raises(UserError, match=r"^h\.json: line 2, column 25 \(the end\): the JSON "):
        importing.prepare("chat_history", data[:26], name="h.json")
    with pytest.raises(UserError, match=r"^h\.json: line 2, column 11: number out of range$"):
        importing.prepare("chat_history", b'[\n {"size": 1e999}]', name="h.json")


def test_a_record_refused_when_written_names_the_line_it_came_from() -> None:
    data = (
        b'{"type":"session","version":3,"id":"s","timestamp":"2024-01-01T00:00:00Z","cwd":"/"}'
        b'\n{"type":"message","id":"a","parentId":null,"timestamp":"2024-01-01T00:00:01Z",'
        b'"message":{"role":"user","content":"hi"}}'
        b'\n{"type":"message","id":"b","parentId":"a","timestamp":"2024-01-01T00:00:02Z",'
        b'"message":{"role":"user","content":"nul \\u0000 here"}}\n'
    )
    # records are checked as they are read (the import streams), so prepare refuses the file
    with pytest.raises(UserError, match=r"^p\.jsonl: line 3: entry 'b': Text contains a NUL"):
        importing.prepare("pi", data, name="p.jsonl")


def test_the_seeds_cover_every_importer_and_provider_format() -> None:
    assert sorted(IMPORTER_SEEDS) == sorted(formats.IMPORTER_FORMATS)
    assert all(PROVIDER_SEEDS[f] for f in formats.PROVIDER_FORMATS)


def test_an_importer_names_the_file_line_and_problem_of_invalid_utf8() -> None:
    data = (
        b'{"type":"session","version":3,"id":"s","timestamp":"2024-01-01T00:00:00Z","cwd":"/"}'
        b'\n{"type":"message","id":"a","parentId":null,"timestamp":"2024-01-01T00:00:01Z",'
        b'"message":{"role":"user","content":"caf\xe9"}}\n'
    )
    drafts = importing.prepare("pi", data, name="broken.jsonl")
    assert drafts[0].report.corrupt_lines == [(2, "invalid UTF-8 at byte 117")]
    assert (
        drafts[0]
        .report.lines()[0]
        .startswith("broken.jsonl: line 2: invalid UTF-8 at byte 117 (kept as a ")
    )


def test_a_whole_file_importer_names_the_file_line_and_problem() -> None:
    data = b'[{"title": "x",\n "mapping": {"a": {"message": "\xff"}}}]'
    with pytest.raises(UserError, match=r"^export\.json: line 2: invalid UTF-8 at byte 31$"):
        importing.prepare("chatgpt_export", data, name="export.json")


def test_a_payload_of_a_shape_no_check_foresaw_is_a_user_error_naming_it() -> None:
    # a toolResult whose content list holds a string: the loader's own checks let it through
    payload = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t", "content": ["not a block"]}}],
            },
        ]
    }
    with pytest.raises(
        UserError,
        match=r"^bedrock payload: at messages\[1\]\.content\[0\]: malformed input "
        r"\(AttributeError in .*; nothing was loaded$",
    ):
        tl.formats.bedrock.load(payload)


@pytest.mark.parametrize("fmt", formats.PROVIDER_FORMATS)
def test_a_tool_input_nested_too_deeply_to_send_is_a_user_error(fmt: str) -> None:
    # found by bench/fuzz.py: the send policy's JSON preview of such an input recursed
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    messages = [
        tl.Message(role="user", content=[tl.text("hi")]),
        tl.Message(role="assistant", content=[tl.tool_use("c1", "f", deep)]),
    ]
    with pytest.raises(UserError, match="nested too deeply"):
        formats.get(fmt).dump(messages)


def test_a_place_from_an_earlier_parse_is_not_reused() -> None:
    # parse() called directly (not through prepare) must not name the last file's place
    from threadline.formats import pi

    good = (
        b'{"type":"session","version":3,"id":"s","timestamp":"2024-01-01T00:00:00Z","cwd":"/"}\n'
        + b'{"type":"message","id":"a","parentId":null,"timestamp":"2024-01-01T00:00:01Z",'
        + b'"message":{"role":"user","content":"hi"}}\n'
    )
    pi.parse(good, name="first.jsonl")
    with pytest.raises(UserError) as caught:
        pi.parse(b"\n\n", name="empty.jsonl")
    assert str(caught.value) == (
        "empty.jsonl: the file is empty; a pi session starts with a session header"
    )


def test_a_chat_history_error_names_the_item_under_its_wrapper() -> None:
    doc = {"content": [{"role": "user", "content": "hi"}, 7]}
    with pytest.raises(UserError) as caught:
        importing.prepare("chat_history", msgspec.json.encode(doc), name="h.json")
    assert str(caught.value) == "h.json: at $.content[1]: the item is not an object"
