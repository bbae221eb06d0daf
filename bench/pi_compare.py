"""Side by side: pi's published SessionManager and threadline on the same generated session.

    .venv/bin/python bench/pi_compare.py [--entries 100000] [--seed 42] [--runs 3]

Copies ../shared/bench/pimono to bench/data/pimono, installs pi's pinned package with npm,
generates the seeded pi v3 session, imports it with ``threadline import pi``, then runs every
operation in a fresh process, alternating pi and threadline, ``--runs`` times each, and prints
the medians and the ratios (threadline / pi). Also times ``Store.list()`` over 1,000 sessions
at two session lengths. Needs node and npm.

``--before SRC`` also runs threadline's side from another checkout's ``src`` folder (say a
``git worktree`` of main) in the same rounds, alternated with the others, and adds its column:
a change measured side by side with what it changes, under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
PIMONO_SRC = ROOT.parent / "shared" / "bench" / "pimono"
PY = sys.executable


def run_json(cmd: list[str], cwd: Path | None = None, src: str | None = None) -> dict[str, float]:
    env = None if src is None else {**os.environ, "PYTHONPATH": src}
    out = subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def prepare(entries: int, seed: int) -> tuple[Path, Path, str]:
    pim = DATA / "pimono"
    if not (pim / "node_modules").exists():
        shutil.copytree(PIMONO_SRC, pim, dirs_exist_ok=True)
        subprocess.run(["npm", "install", "--silent"], cwd=pim, check=True)
    pi_file = DATA / f"pi-{entries}-{seed}.jsonl"
    if not pi_file.exists():
        subprocess.run(
            ["node", "gen-session.mjs", str(pi_file), str(entries), str(seed)],
            cwd=pim,
            check=True,
            capture_output=True,
        )
    store = DATA / f"tl-{entries}-{seed}"
    sid = f"pi-{entries}-{seed}"
    if not (store / f"{sid}.jsonl").exists():
        store.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                str(ROOT / ".venv" / "bin" / "threadline"),
                "--store",
                str(store),
                "import",
                "pi",
                str(pi_file),
                "--session-id",
                sid,
            ],
            check=True,
        )
    if not (store / f"{sid}.jsonl.idx").exists():
        # The import writes the log only; the first open writes the index beside it (issue 19).
        # Each timed process opens a copy of both: the open of a session opened before.
        opener = "import sys, threadline as tl; tl.open_store(sys.argv[1]).open(sys.argv[2])"
        subprocess.run([PY, "-c", opener, str(store), sid], check=True)
    return pim, pi_file, sid


def list_bench(n_sessions: int, entries_each: int) -> dict[str, float]:
    import threadline as tl

    with tempfile.TemporaryDirectory() as d:
        store = tl.open_store(d, durability="flush")
        for i in range(n_sessions):
            s = store.create(session_id=f"s{i:05d}")
            for j in range(entries_each):
                s.append_message("user" if j % 2 == 0 else "assistant", f"message {j} " * 20)
            s.close()
        t = time.perf_counter()
        rows = store.list()
        cold = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        rows = store.list()
        warm = (time.perf_counter() - t) * 1000
        assert len(rows) == n_sessions
        return {
            "sessions": n_sessions,
            "entriesEach": entries_each,
            "coldMs": round(cold, 1),
            "warmMs": round(warm, 1),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-list", action="store_true")
    ap.add_argument("--before", metavar="SRC", help="another checkout's src folder, run alongside")
    args = ap.parse_args()
    pim, pi_file, sid = prepare(args.entries, args.seed)
    store = DATA / f"tl-{args.entries}-{args.seed}"
    keys = {
        "load": ["loadMs", "loadCpuMs", "maxRssMB"],
        "context": ["contextMs", "contextCpuMs", "contextMessages"],
        "append": ["perAppendUs", "contextAfterAppendMs"],
        "tree": ["treeMs", "treeCpuMs"],
    }
    sides = ["pi", "tl"] + (["before"] if args.before else [])
    results: dict[str, dict[str, list[float]]] = {}

    def add(key: str, side: str, value: float) -> None:
        results.setdefault(key, {s: [] for s in sides})[side].append(value)

    nan = float("nan")
    states: list[str] = []  # the index's state at each threadline open ("used": it was read)
    for op, fields in keys.items():
        for n in range(args.runs):
            runs = {"pi": run_json(["node", "bench.mjs", op, str(pi_file)], cwd=pim)}
            tl_cmd = [PY, str(ROOT / "bench" / "tl_ops.py"), op, str(store), sid]
            # the process right after pi's pays for its exit (700 MB freed, dirty pages written
            # back): with --before, the two threadline sides take turns at that place
            if args.before and n % 2:
                runs["before"] = run_json(tl_cmd, src=args.before)
            runs["tl"] = run_json(tl_cmd)
            if args.before and not n % 2:
                runs["before"] = run_json(tl_cmd, src=args.before)
            states.append(str(runs["tl"].get("index", "")))
            for side, got in runs.items():
                for f in fields + (["loadMs"] if op != "load" else []):
                    add(f"{op}.{f}", side, got.get(f, nan))
                if op == "load":
                    add(
                        "load.maxRssAfterOpenMB",
                        side,
                        got["maxRssMB" if side == "pi" else "maxRssAfterOpenMB"],
                    )
                if op == "append":
                    add("append.perAppendFsyncUs", side, got.get("perAppendFsyncUs", nan))
                if op == "context":
                    add("context.materializeMs", side, got.get("materializeMs", nan))
    print(json.dumps(results), file=sys.stderr)  # every run, for ranges
    print("threadline's index at open:", ", ".join(f"{x} {states.count(x)}" for x in set(states)))
    head = f"| metric (median of {args.runs}) | pi | threadline | ratio |"
    if args.before:
        head += " before | ratio before |"
    print(head)
    print("|---|---:|---:|---:|" + ("---:|---:|" if args.before else ""))
    for key, v in results.items():
        p, t = statistics.median(v["pi"]), statistics.median(v["tl"])
        ratio = f"{t / p:.3f}" if p == p and p else "-"
        row = f"| {key} | {p:g} | {t:g} | {ratio} |"
        if args.before:
            b = statistics.median(v["before"])
            row += f" {b:g} | {f'{b / p:.3f}' if p == p and p else '-'} |"
        print(row)
    if not args.skip_list:
        for each in (10, 1000):
            print("list:", json.dumps(list_bench(1000, each)))


if __name__ == "__main__":
    main()
