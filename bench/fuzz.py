"""Fuzz the JSONL loader, every importer and every provider format with mutated real data.

The promise checked (issue 13): whatever the input, only ``UserError`` / ``StoreError`` (the
``ThreadlineError`` tree) escapes, no case hangs, memory stays bounded.

    .venv/bin/python bench/fuzz.py --cases 1000000 --seed 1          # all three targets
    .venv/bin/python bench/fuzz.py --target importers --cases 20000 --out /tmp/fuzz.json

Seeds come from ``../shared/realdata`` (the transcripts of each importer; provider payloads made
by dumping imported sessions to each format; a JSONL session written by threadline). Each case
applies 1-4 mutations: byte edits (flip, insert, delete, truncate, invalid UTF-8, duplicate or
swap lines) or structural edits of a decoded JSON line or payload (replace a node by another
type, a huge or negative number, NaN, a deep nest, a long string; drop a key). Every exception
outside the threadline tree is counted by the place it was raised (file:line, type); a case
slower than ``--hang`` seconds counts as a hang, and a case that spends ``--stop`` seconds of CPU
is stopped (a SIGVTALRM timer), counted as a hang at the place it was looping, and the run goes
on. Prints a JSON summary.

The test suite runs the same targets through hypothesis (tests/test_fuzz.py) with a few
thousand cases each.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("THREADLINE_REALDATA", ROOT.parent / "shared" / "realdata"))
if not REALDATA.exists():
    REALDATA = ROOT.parent.parent / "shared" / "realdata"

import threadline as tl  # noqa: E402
from threadline import formats, importing  # noqa: E402
from threadline.errors import ThreadlineError  # noqa: E402

IMPORTER_DIRS = {
    "pi": "pi_session",
    "claude_code": "claude_code",
    "chatgpt_export": "chatgpt_export",
    "codex": "codex_cli",
    "google_adk": "google_adk",
    "chat_history": None,
}
SEED_BYTES = 12_000  # seeds are cut to this many bytes (whole lines) to keep cases fast


def _cut(data: bytes, limit: int = SEED_BYTES) -> bytes:
    if len(data) <= limit:
        return data
    nl = data.rfind(b"\n", 0, limit)
    return data[: nl + 1] if nl > 0 else data[:limit]


# -- seeds ------------------------------------------------------------------------------------


def importer_seeds() -> dict[str, list[bytes]]:
    seeds: dict[str, list[bytes]] = {}
    for fmt, folder in IMPORTER_DIRS.items():
        found = []
        if folder is not None and (REALDATA / folder).is_dir():
            for p in sorted((REALDATA / folder).iterdir()):
                if p.suffix in (".json", ".jsonl"):
                    data = p.read_bytes()
                    found.append(
                        data if p.suffix == ".json" and len(data) < 200_000 else _cut(data)
                    )
        seeds[fmt] = found
    # chat_history has no real sample: both of its layouts, written here (a list of Responses
    # items; the wrapped entries {"id","ts","type","size","content"})
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    ]
    wrapped = [
        {"id": f"e{k}", "ts": "2026-01-01T00:00:00Z", "type": "item", "size": 1, "content": it}
        for k, it in enumerate(items)
    ]
    seeds["chat_history"] = [
        json.dumps(items, indent=1).encode(),
        json.dumps(wrapped, indent=1).encode(),
    ]
    return {k: v for k, v in seeds.items() if v}


def session_messages() -> list[Any]:
    """Messages of a few imported real sessions (the provider formats' seeds dump them)."""
    out = []
    for fmt, folder in (("claude_code", "claude_code"), ("pi", "pi_session")):
        for p in sorted((REALDATA / folder).glob("*.jsonl"))[:3]:
            try:
                drafts = importing.prepare(fmt, _cut(p.read_bytes(), 40_000), name=p.name)
            except ThreadlineError:
                continue
            for d in drafts:
                out.append(importing.messages_of(d))
    return out


def provider_seeds() -> dict[str, list[Any]]:
    seeds: dict[str, list[Any]] = {f: [] for f in formats.PROVIDER_FORMATS}
    for messages in session_messages():
        for fmt in formats.PROVIDER_FORMATS:
            try:
                payload = formats.get(fmt).dump(messages)
            except ThreadlineError:
                continue
            seeds[fmt].append(msgspec.json.decode(msgspec.json.encode(payload)))
    return seeds


def loader_seed() -> bytes:
    """A JSONL session written by threadline, with every entry type."""
    with tempfile.TemporaryDirectory() as tmp:
        store = tl.open_store(tmp, durability="flush")
        s = store.create(session_id="seed")
        first = s.append_message("user", "hello there")
        s.append_model_change("openai", "gpt-x")
        s.append_thinking_level("high")
        s.append_message("assistant", [tl.text("checking"), tl.tool_use("c1", "grep", {"q": 1})])
        s.append_message("tool", [tl.tool_result("c1", "found it")])
        s.set_label(first, "start")
        s.append_session_info("name")
        kept = s.append_message("user", "go on")
        s.append_compaction("summary", kept, 10)
        s.digest(0, 0, "digest")  # type: ignore[attr-defined]
        s.branch_with_summary(first, "branch summary")
        s.tag("t1")  # type: ignore[attr-defined]
        s.close()
        return (Path(tmp) / "seed.jsonl").read_bytes()


# -- mutations --------------------------------------------------------------------------------

NASTY: list[Any] = [
    None,
    True,
    0,
    -1,
    2**63,
    -(2**64),
    1e308,
    "",
    "x" * 5000,
    "\ud800",
    "\u2028",
    "\x00",
    [],
    {},
    [[[[[]]]]],
    {"type": None},
    3.5,
    "../../etc",
    {"content": None},
    [None],
    {"": ""},
]


def _nasty(rng: random.Random) -> Any:
    """A fresh copy of a hostile value (later mutations must not edit the shared list)."""
    return copy.deepcopy(rng.choice(NASTY))


def _deep(n: int) -> Any:
    value: Any = []
    for _ in range(n):
        value = [value]
    return value


def mutate_value(rng: random.Random, value: Any) -> Any:
    """Replace, drop or retype one random node of a JSON value (returns the new root)."""
    nodes: list[tuple[Any, Any]] = []  # (container, key)
    stack = [value]
    while stack and len(nodes) < 2000:
        v = stack.pop()
        if isinstance(v, dict):
            for k in list(v):
                nodes.append((v, k))
                stack.append(v[k])
        elif isinstance(v, list):
            for i in range(len(v)):
                nodes.append((v, i))
                stack.append(v[i])
    if not nodes:
        return _nasty(rng)
    container, key = rng.choice(nodes)
    op = rng.random()
    if op < 0.15 and isinstance(container, dict):
        del container[key]
    elif op < 0.25:
        container[key] = _deep(rng.choice((70, 200, 1200)))
    elif op < 0.35 and isinstance(container[key], str):
        s = container[key]
        container[key] = s[: rng.randrange(len(s) + 1)] + rng.choice(("\ud800", "\x00", "é", ""))
    elif op < 0.45 and isinstance(container, dict):
        container[
            rng.choice(
                (
                    "type",
                    "role",
                    "id",
                    "content",
                    "parentUuid",
                    "uuid",
                    "message",
                    "parts",
                    "mapping",
                    "timestamp",
                )
            )
        ] = _nasty(rng)
    else:
        container[key] = _nasty(rng)
    return value


def _encode(value: Any) -> bytes:
    try:
        return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        return b"{"


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.35 and lines:  # structural edit of one JSON line
            i = rng.randrange(len(lines))
            try:
                value = json.loads(lines[i])
            except (ValueError, RecursionError):
                continue
            lines[i] = _encode(mutate_value(rng, value))
        elif op < 0.45 and lines:
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif op < 0.5 and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            blob = bytearray(b"\n".join(lines))
            if not blob:
                blob = bytearray(b"{")
            pos = rng.randrange(len(blob))
            kind = rng.random()
            if kind < 0.3:
                blob[pos] = rng.randrange(256)
            elif kind < 0.5:
                blob[pos:pos] = rng.choice(
                    (
                        b"\xff",
                        b"\xc3",
                        b"\xed\xa0\x80",
                        b"\x00",
                        b"[" * 1100,
                        b'"',
                        b"\n",
                        b"}",
                        b"1e999",
                        b"-0",
                        b"\\u0000",
                    )
                )
            elif kind < 0.7:
                del blob[pos : pos + rng.randint(1, 64)]
            else:
                blob = blob[:pos]
            lines = bytes(blob).split(b"\n")
    return b"\n".join(lines)


# -- targets ----------------------------------------------------------------------------------


class LoaderTarget:
    """Write the mutated bytes as a session file, open it, build its context and tree."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store = tl.open_store(directory, durability="flush")
        self.path = directory / "fz.jsonl"

    def __call__(self, data: bytes) -> None:
        self.path.write_bytes(data)
        cache = self.directory / ".list-cache.json"
        if cache.exists():
            cache.unlink()
        try:
            s = self.store.open("fz", read_only=True)
            ctx = s.context()
            for m in ctx.messages:
                _ = m.text
            s.tree(flat=True)
            s.stats()
            s.tags()  # type: ignore[attr-defined]
            s.operations()  # type: ignore[attr-defined]
        finally:
            self.store.list()


def importer_target(fmt: str) -> Callable[[bytes], None]:
    def run(data: bytes) -> None:
        drafts = importing.prepare(fmt, data, name=f"fuzz.{fmt}")
        store = tl.open_store("memory://")
        for s in importing.write(store, drafts):
            list(s.context().messages)

    return run


def provider_target(fmt: str) -> Callable[[Any], None]:
    module = formats.get(fmt)

    def run(payload: Any) -> None:
        messages = module.load(payload)
        module.dump(messages)

    return run


# -- driver -----------------------------------------------------------------------------------


def where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "threadline" in f.filename]
    f = (inside or frames)[-1]
    return f"{type(exc).__name__} at {Path(f.filename).name}:{f.lineno}"


class Stuck(BaseException):
    """Raised into a case that used up its CPU time (BaseException: no ``except Exception``
    in the code under test swallows it)."""


def _stuck(_signum: int, _frame: Any) -> None:
    raise Stuck()


class Tally:
    def __init__(self, hang: float, stop: float = 60.0) -> None:
        self.cases = 0
        self.expected = 0
        self.bad: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.hangs = 0
        self.stuck: Counter[str] = Counter()
        self.slowest = 0.0
        self.hang = hang
        self.stop = stop

    def run(self, fn: Callable[[Any], None], arg: Any, label: str) -> None:
        started = time.perf_counter()
        stopped = False
        signal.signal(signal.SIGVTALRM, _stuck)
        signal.setitimer(signal.ITIMER_VIRTUAL, self.stop)
        try:
            fn(arg)
        except ThreadlineError:
            self.expected += 1
        except Stuck as exc:  # an endless loop: where it was looping
            self.stuck[f"{label}: {where(exc)}"] += 1
            stopped = True
        except Exception as exc:  # what the fuzzer is looking for
            key = f"{label}: {where(exc)}"
            self.bad[key] += 1
            self.examples.setdefault(key, f"{exc!r}"[:300])
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        took = time.perf_counter() - started
        self.slowest = max(self.slowest, took)
        if stopped or took > self.hang:
            self.hangs += 1
        self.cases += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=30_000, help="cases in all (split evenly)")
    ap.add_argument("--target", choices=("all", "loader", "importers", "formats"), default="all")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hang", type=float, default=5.0, help="seconds that count as a hang")
    ap.add_argument(
        "--stop", type=float, default=60.0, help="CPU seconds after which a case is stopped"
    )
    ap.add_argument(
        "--out",
        default="",
        help="also write the summary so far to this file every 30 s (and at the end)",
    )
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    targets: list[tuple[str, Callable[[Any], None], list[Any], bool]] = []
    tmp = tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    if args.target in ("all", "loader"):
        targets.append(("loader", LoaderTarget(Path(tmp.name)), [loader_seed()], True))
    if args.target in ("all", "importers"):
        for fmt, seeds in importer_seeds().items():
            targets.append((f"import:{fmt}", importer_target(fmt), seeds, True))
    if args.target in ("all", "formats"):
        for fmt, payloads in provider_seeds().items():
            if payloads:
                targets.append((f"format:{fmt}", provider_target(fmt), payloads, False))
    tallies: dict[str, Tally] = {}
    started = time.monotonic()
    peak_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    last_report = started

    def summary() -> dict[str, Any]:
        out: dict[str, Any] = {
            "seed": args.seed,
            "seconds": round(time.monotonic() - started, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "rss_at_start_mb": round(peak_start / 1024, 1),
            "targets": {
                g: {
                    "cases": t.cases,
                    "threadline_errors": t.expected,
                    "other_exceptions": sum(t.bad.values()),
                    "hangs": t.hangs,
                    "stopped": dict(t.stuck.most_common()),
                    "slowest_case_s": round(t.slowest, 3),
                    "by_site": dict(t.bad.most_common()),
                    "examples": t.examples,
                }
                for g, t in tallies.items()
            },
        }
        out["cases"] = sum(t.cases for t in tallies.values())
        out["other_exceptions"] = sum(sum(t.bad.values()) for t in tallies.values())
        out["hangs"] = sum(t.hangs for t in tallies.values())
        return out

    # round-robin over the targets, so that a run stopped early has covered each of them
    for i in range(args.cases):
        label, fn, seeds, raw = targets[i % len(targets)]
        tally = tallies.setdefault(label, Tally(args.hang, args.stop))
        seed = rng.choice(seeds)
        if raw:
            arg = mutate_bytes(rng, seed)
        else:
            arg = msgspec.json.decode(msgspec.json.encode(seed))
            for _ in range(rng.randint(1, 4)):
                arg = mutate_value(rng, arg)
        tally.run(fn, arg, label)
        if args.out and time.monotonic() - last_report > 30:
            last_report = time.monotonic()
            _write(args.out, summary())
    result = summary()
    if args.out:
        _write(args.out, result)
    print(json.dumps(result, indent=2))
    tmp.cleanup()
    return 1 if result["other_exceptions"] or result["hangs"] else 0


def _write(path: str, data: dict[str, Any]) -> None:
    """The summary so far, replaced atomically (a long run can be read while it goes)."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
