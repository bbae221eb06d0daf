"""What the JSONL index buys an open, in CPU seconds (issue 19).

    PYTHONPATH=src python bench/bench_index.py STORE_DIR SESSION_ID [--runs 3] [--grow 100]

Works on a copy of the session (log and index) in a temp directory beside STORE_DIR. Each
measurement runs in a fresh process, alternated, and reports ``time.process_time`` around
``Store.open`` (CPU seconds are what a loaded machine still measures fairly): ``parse`` with the
index ignored (the whole file parsed), ``index`` through an index that matches, ``extended``
after another writer appended ``--grow`` messages past the index (the index is extended from
the new lines), then ``index`` again through the extended index.

    PYTHONPATH=src python bench/bench_index.py STORE_DIR SESSION_ID --gc

instead measures the cyclic GC's share of appends after a big materialized context: open,
materialize the context, then 2,000 appends (``durability="flush"``), CPU per append, once as
is and once with ``gc.freeze()`` called after the materialization (fresh process each).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINE = (
    b'{"type":"message","id":"grow%d","parent_id":%s,"timestamp":"2026-01-03T00:00:00Z",'
    b'"message":{"role":"user","content":[{"type":"text","text":"later"}]}}\n'
)


def child(store_dir: str, sid: str, mode: str) -> None:
    import threadline as tl
    from threadline.store import jsonl, jsonl_index

    if mode == "parse":  # the index neither read nor removed nor written
        jsonl.INDEX_MIN_BYTES = 1 << 62
        jsonl_index.read = lambda path: None  # type: ignore[assignment]
        jsonl_index.remove = lambda path: None  # type: ignore[assignment]
    store = tl.open_store(store_dir, durability="flush")
    cpu, wall = time.process_time(), time.perf_counter()
    s = store.open(sid, read_only=True)
    out = {
        "mode": mode,
        "cpu_s": time.process_time() - cpu,
        "wall_s": time.perf_counter() - wall,
        "state": getattr(s.state.log, "index_state", ""),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(out))


def gc_child(store_dir: str, sid: str, mode: str) -> None:
    import gc

    import threadline as tl

    store = tl.open_store(store_dir, durability="flush")
    s = store.open(sid)
    cpu = time.process_time()
    n = len(list(s.context().messages))
    materialize = time.process_time() - cpu
    if mode == "freeze":
        gc.freeze()
    cpu = time.process_time()
    for i in range(2000):
        s.append_message("user", "x" * (200 + i % 50))
    per = (time.process_time() - cpu) / 2000
    s.close()
    out = {
        "mode": mode,
        "messages": n,
        "materialize_cpu_s": round(materialize, 3),
        "append_cpu_us": round(per * 1e6, 1),
        "frozen": gc.get_freeze_count(),
    }
    print(json.dumps(out))


def gc_main(src: Path, sid: str) -> None:
    for mode in ("as-is", "freeze"):
        work = Path(tempfile.mkdtemp(prefix="tl-bench-index-", dir=src.parent))
        try:
            for name in (f"{sid}.jsonl", f"{sid}.jsonl.idx"):
                if (src / name).exists():
                    shutil.copyfile(src / name, work / name)
            res = subprocess.run(
                [sys.executable, __file__, "--gc-child", str(work), sid, mode],
                check=True,
                capture_output=True,
                text=True,
            )
            print(f"load average {os.getloadavg()[0]:.1f}:", res.stdout.strip().splitlines()[-1])
        finally:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, sid: str, mode: str) -> dict[str, float | str]:
    res = subprocess.run(
        [sys.executable, __file__, "--child", str(work), sid, mode],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("session")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--grow", type=int, default=100)
    ap.add_argument("--gc", action="store_true")
    args = ap.parse_args()
    src = Path(args.store)
    if args.gc:
        gc_main(src, args.session)
        return
    work = Path(tempfile.mkdtemp(prefix="tl-bench-index-", dir=src.parent))
    try:
        log = work / f"{args.session}.jsonl"
        shutil.copyfile(src / log.name, log)
        index = src / f"{log.name}.idx"
        if index.exists():
            shutil.copyfile(index, work / index.name)
        first = run(work, args.session, "index")  # builds it when it was missing or stale
        print(f"load average {os.getloadavg()[0]:.1f}; first open: {first}")
        cpu: dict[str, list[float]] = {"parse": [], "index": []}
        for _ in range(args.runs):
            for mode in ("parse", "index"):
                r = run(work, args.session, mode)
                assert r["state"] == ("none" if mode == "parse" else "used"), r
                cpu[mode].append(float(r["cpu_s"]))
        with open(log, "ab") as fh:  # another writer's appends, under the last line
            last = _last_id(log)
            fh.write(LINE % (0, json.dumps(last).encode()))
            for i in range(1, args.grow):
                fh.write(LINE % (i, b'"grow%d"' % (i - 1)))
        extended = run(work, args.session, "index")
        again = run(work, args.session, "index")
        assert extended["state"] == "extended" and again["state"] == "used", (extended, again)
        p, i = statistics.median(cpu["parse"]), statistics.median(cpu["index"])
        print(f"| open, CPU s (median of {args.runs}) | parse | index | ratio |")
        print("|---|---:|---:|---:|")
        print(f"| {args.session} | {p:.3f} | {i:.3f} | {i / p:.2f} |")
        print(
            f"grown by {args.grow}: extended open {float(extended['cpu_s']):.3f} s CPU, "
            f"then {float(again['cpu_s']):.3f} s CPU through the extended index"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _last_id(log: Path) -> str | None:
    with open(log, "rb") as fh:
        fh.seek(max(0, log.stat().st_size - (1 << 20)))
        for line in reversed(fh.read().splitlines()):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") == "message" and rec.get("id"):
                return str(rec["id"])
    return None


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--gc-child":
        gc_child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
