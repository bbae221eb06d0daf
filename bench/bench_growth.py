"""How the cost of open, context and append grows with the session (issue 19).

    .venv/bin/python bench/bench_growth.py [--sizes 10000 100000 1000000]

Writes one JSONL session per size straight to disk (a main path with a short side branch every
100 entries, user/assistant/tool messages of 200-2,000 characters, as pi's generator mixes
them), then for each size, in a fresh process each: a first ``Store.open`` (no index yet: it
parses the file and writes ``<id>.jsonl.idx``), then ``Store.open`` through the index (with the
peak RSS after it), ``context()`` of the leaf, materializing its messages, ``context()`` built
again (its cache dropped: the first collection of the cyclic GC after an open walks the
open's tuple of ids once, ~13 ms at 1M, and falls inside the first ``context()`` at 100k and
1M but after it at 10k), and 1,000 appends with ``durability="flush"``; then, in another fresh
process, ``Store.open``, ``context()`` and the same 1,000 appends (what an agent does: after
materializing 990k messages at 1M the process holds ~1.9 GB, and its appends' ``write`` calls
cost the kernel more). Prints a table of totals and per-entry costs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
sys.path.insert(0, str(ROOT / "src"))

FILLER = "lorem ipsum dolor sit amet session entry token context " * 40


def generate(path: Path, n: int) -> None:
    import random

    from threadline.model.content import Message, text, tool_result
    from threadline.model.entries import MessageEntry, SessionHeader, encode

    rng = random.Random(n)
    sid = path.stem
    with open(path, "wb") as fh:
        fh.write(encode(SessionHeader(id=sid, version=1, timestamp="2026-01-01T00:00:00Z")) + b"\n")
        parent = None
        for i in range(n):
            body = FILLER[: 200 + rng.randrange(1800)]
            kind = i % 3
            if kind == 0:
                msg = Message(role="user", content=[text(body)])
            elif kind == 1:
                msg = Message(role="assistant", content=[text(body)])
            else:
                msg = Message(role="tool", content=[tool_result(f"t{i}", body)])
            eid = f"e{i:07d}"
            # every 100th entry starts a one-entry side branch off the main path
            under = parent if i % 100 != 99 else f"e{i - 2:07d}"
            ts = f"2026-01-01T00:00:{i % 60:02d}Z"
            fh.write(
                encode(MessageEntry(id=eid, parent_id=under, timestamp=ts, message=msg)) + b"\n"
            )
            if i % 100 != 99:
                parent = eid
        fh.write(
            encode(
                MessageEntry(
                    id="last",
                    parent_id=parent,
                    timestamp="2026-01-02T00:00:00Z",
                    message=Message(role="user", content=[text("end")]),
                )
            )
            + b"\n"
        )


def appends(s: Any) -> float:
    """µs per append of 1,000 appends of 200-1,199 characters."""
    t = time.perf_counter()
    for i in range(1000):
        s.append_message("user", FILLER[: 200 + i])
    return (time.perf_counter() - t) * 1000


def child(store_dir: str, sid: str, first: bool = False, append_only: bool = False) -> None:
    import threadline as tl

    out: dict[str, Any] = {}
    store = tl.open_store(store_dir, durability="flush")
    t, c = time.perf_counter(), time.process_time()
    s = store.open(sid)
    out["open_s"], out["open_cpu_s"] = time.perf_counter() - t, time.process_time() - c
    out["rss_after_open_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["index"] = getattr(s.state.log, "index_state", "")
    if first:
        print(json.dumps(out))
        return
    if append_only:  # what an agent does: open, context, append (nothing materialized)
        s.context()
        out["append_us"] = appends(s)
        s.close()
        print(json.dumps(out))
        return
    t, c = time.perf_counter(), time.process_time()
    ctx = s.context()
    out["context_s"], out["context_cpu_s"] = time.perf_counter() - t, time.process_time() - c
    out["messages"] = len(ctx.messages)
    t = time.perf_counter()
    list(ctx.messages)
    out["materialize_s"] = time.perf_counter() - t
    s.state.invalidate()  # drops the cached view
    c = time.process_time()
    s.context()
    out["context_again_cpu_s"] = time.process_time() - c
    out["append_us"] = appends(s)
    s.close()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(
        "| entries | first open, builds the index (s) | index (MB) | open (s, wall / CPU) "
        "| open µs/entry "
        "| RSS after open (MB) | context (ms) | context µs/entry | context CPU (ms) "
        "| CPU µs/entry | materialize (ms) | context again, CPU (ms) | again µs/entry "
        "| append after all that (µs each) | append after open + context (µs each) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        store = DATA / f"growth-{n}"
        store.mkdir(parents=True, exist_ok=True)
        path = store / f"g{n}.jsonl"
        if not path.exists():
            generate(path, n)
        work = DATA / f"growth-work-{n}"
        work.mkdir(exist_ok=True)
        dst = work / path.name
        shutil.copyfile(path, dst)  # appends go to a copy
        index = work / f"{path.name}.idx"
        index.unlink(missing_ok=True)
        runs = []
        built = b""
        for flag in ("--first", "--child", "--append"):
            if flag != "--first":  # the log as generated, and the index the first open wrote
                built = built or index.read_bytes()
                shutil.copyfile(path, dst)
                index.write_bytes(built)
            res = subprocess.run(
                [sys.executable, __file__, flag, str(work), path.stem],
                check=True,
                capture_output=True,
                text=True,
            )
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        first, r, a = runs
        assert first["index"] == "built" and r["index"] == a["index"] == "used", (first, r, a)
        print(
            f"| {n:,} | {first['open_s']:.2f} | {index.stat().st_size / 1e6:.1f} "
            f"| {r['open_s']:.2f} / {r['open_cpu_s']:.2f} | {r['open_s'] * 1e6 / n:.2f} | "
            f"{r['rss_after_open_mb']:.0f} | {r['context_s'] * 1000:.1f} | "
            f"{r['context_s'] * 1e6 / n:.3f} | {r['context_cpu_s'] * 1000:.1f} | "
            f"{r['context_cpu_s'] * 1e6 / n:.3f} | {r['materialize_s'] * 1000:.0f} | "
            f"{r['context_again_cpu_s'] * 1000:.1f} | {r['context_again_cpu_s'] * 1e6 / n:.3f} | "
            f"{r['append_us']:.1f} | {a['append_us']:.1f} |",
            flush=True,
        )
        dst.unlink()
        index.unlink()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--child", "--first", "--append"):
        child(
            sys.argv[2],
            sys.argv[3],
            first=sys.argv[1] == "--first",
            append_only=sys.argv[1] == "--append",
        )
    else:
        main()
