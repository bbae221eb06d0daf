"""Fuzzing in the suite (issue 13 item 8): mutated real files through the JSONL loader, every
importer and every provider format let only threadline errors escape. The mutation engine and
targets are bench/fuzz.py's, which runs the same for millions of cases; here hypothesis drives a
few thousand, and shrinks any failure to a small reproducer."""

from __future__ import annotations

import contextlib
import importlib.util
import random
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threadline as tl
from threadline import formats, importing
from threadline.errors import ThreadlineError, UserError

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
        match=r"^bedrock payload: malformed input \(AttributeError "
        r"in .*; nothing was loaded$",
    ):
        tl.formats.bedrock.load(payload)
