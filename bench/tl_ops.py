"""threadline's side of the pi comparison: one operation per fresh process, one JSON line out.

    python bench/tl_ops.py OP STORE_DIR SESSION_ID      OP = load | context | append | tree

Mirrors ../shared/bench/pimono/bench.mjs: ``load`` = Store.open, ``context`` = open + context()
(timed alone, then materialized), ``append`` = open + 10,000 appends with durability="flush"
(the same text mix as pi's bench) + context after the appends, ``tree`` = open + tree().
Appends go to a private copy of the session, never to the input.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import threadline as tl
from threadline.model.content import tool_result


def ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 1)


def cpu_ms(t: float) -> float:
    """CPU milliseconds since ``t`` (``time.process_time``): less moved by a busy machine."""
    return round((time.process_time() - t) * 1000, 1)


def main() -> None:
    op, store_dir, sid = sys.argv[1:4]
    work = Path(tempfile.mkdtemp(prefix="tl-bench-"))
    shutil.copy(Path(store_dir) / f"{sid}.jsonl", work)
    index = Path(store_dir) / f"{sid}.jsonl.idx"
    if index.exists():  # the index beside the log (built by an earlier open; issue 19)
        shutil.copy(index, work)
    res: dict[str, object] = {"op": op}
    try:
        store = tl.open_store(work, durability="flush")
        t, c = time.perf_counter(), time.process_time()
        s = store.open(sid)
        res["loadMs"], res["loadCpuMs"] = ms(t), cpu_ms(c)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        res["maxRssAfterOpenMB"] = round(rss / 1024, 1)
        res["index"] = getattr(s.state.log, "index_state", "")
        res["entries"] = len(s.entry_ids())
        if op == "context":
            t, c = time.perf_counter(), time.process_time()
            ctx = s.context()
            res["contextMs"], res["contextCpuMs"] = ms(t), cpu_ms(c)
            res["contextMessages"] = len(ctx.messages)
            t = time.perf_counter()
            msgs = list(ctx.messages)
            res["materializeMs"] = ms(t)
            assert len(msgs) == len(ctx.messages)
        elif op == "append":
            s.context()
            seed = 7

            def rnd() -> float:
                nonlocal seed
                seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
                return seed / 0x7FFFFFFF

            filler = "lorem ipsum dolor sit amet session entry token context " * 40

            def text() -> str:
                return filler[: 200 + int(rnd() * 1800)]

            t = time.perf_counter()
            for i in range(10_000):
                r = i % 3
                if r == 0:
                    s.append_message("user", text())
                elif r == 1:
                    s.append_message(
                        "assistant",
                        text(),
                        model="claude-sonnet-4-5",
                        usage={"input": 1000, "output": 100, "total": 1100},
                        stop_reason="stop",
                    )
                else:
                    s.append_message("tool", [tool_result(f"t{i}", text())])
            res["append10kMs"] = ms(t)
            res["perAppendUs"] = round(res["append10kMs"] * 1000 / 10_000, 1)  # type: ignore[operator]
            t = time.perf_counter()
            ctx = s.context()
            res["contextAfterAppendMs"] = round((time.perf_counter() - t) * 1000, 3)
            res["contextMessages"] = len(ctx.messages)
            s.close()
            fs = tl.open_store(work, durability="fsync").open(sid)
            t = time.perf_counter()
            for _ in range(200):
                fs.append_message("user", text())
            res["perAppendFsyncUs"] = round((time.perf_counter() - t) * 1e6 / 200, 1)
            fs.close()
        elif op == "tree":
            t, c = time.perf_counter(), time.process_time()
            roots = s.tree()
            res["treeMs"], res["treeCpuMs"] = ms(t), cpu_ms(c)
            res["roots"] = len(roots)
    finally:
        res["maxRssMB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(res))


if __name__ == "__main__":
    main()
