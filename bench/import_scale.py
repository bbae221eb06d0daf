"""Importing a large pi session: throughput (entries/s) and peak memory (RSS).

    python bench/import_scale.py                      # 100k and 1M entries, JSONL store
    python bench/import_scale.py --entries 100000 --store sqlite
    python bench/import_scale.py --cli                # the whole `threadline import` command
    python bench/import_scale.py --cli --src ../main/src   # the same, another source tree
    python bench/import_scale.py --entries 100000 --store postgres  # THREADLINE_BENCH_PG or test db

Each measurement runs in a fresh process; its peak RSS comes from ``wait4`` (the kernel's
high-water mark of the whole process, interpreter included). The pi session files are made by
pi's own generator (``gen-session.mjs`` in the pimono reference benchmark, needs node), seeded,
once, into ``--data`` (the 1M-entry file is ~1.3 GB).

Without ``--cli`` two phases are timed apart: ``import`` (read, convert, spool, the atomic write of
the new session: ``importing.prepare`` + ``importing.create``) and ``catalog`` (the keyword index
the import command builds next, ``store.catalog.index()`` with no embedder). ``--cli`` times
``threadline import pi FILE`` end to end (duplicate check, import, keyword index), which is what
the figure of the issue (44.6 s, 6.1 GB at 1M) was taken from. Semantic embedding is left out
(``THREADLINE_EMBEDDER=none``): its cost is the embedding model's, per message, not the import's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIMONO = ROOT.parent / "shared" / "bench" / "pimono"
if not PIMONO.exists():
    PIMONO = ROOT.parent.parent / "shared" / "bench" / "pimono"

_IMPORT = """
import json, sys, time
from threadline import importing
from threadline.stores import open_store
store = open_store(sys.argv[1], **json.loads(sys.argv[3]))
t = time.perf_counter()
drafts = importing.prepare("pi", sys.argv[2])
ids = importing.create(store, drafts, ["bench"])
print(json.dumps({"seconds": time.perf_counter() - t, "entries": drafts[0].entries}))
"""

_CATALOG = """
import json, sys, time
from threadline.stores import open_store
store = open_store(sys.argv[1])
t = time.perf_counter()
status = store.catalog.index()
print(json.dumps({"seconds": time.perf_counter() - t, "messages": status.messages}))
"""


def pi_file(data: Path, entries: int, seed: int) -> Path:
    path = data / f"pi-{entries}-{seed}.jsonl"
    if not path.exists():
        subprocess.run(
            ["node", "gen-session.mjs", str(path), str(entries), str(seed)],
            cwd=PIMONO,
            check=True,
            capture_output=True,
        )
    return path


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MB and stdout of one child process."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return wall, usage.ru_maxrss // 1024, text


PG_URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def store_url(kind: str, where: Path) -> str:
    if kind == "jsonl":
        return str(where / "store")
    if kind == "sqlite":
        return f"sqlite:///{where / 'store.db'}"
    return PG_URL


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--store", choices=["jsonl", "sqlite", "postgres"], default="jsonl")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "tl-import-bench")
    ap.add_argument("--cli", action="store_true", help="time `threadline import` end to end")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="threadline sources to run")
    args = ap.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(args.src.resolve()),
        "THREADLINE_EMBEDDER": "none",
    }
    options: dict[str, str] = {}
    if args.store == "postgres":  # a schema of its own, dropped at the end
        from threadline.store.postgres import upgrade

        options = {"schema": f"bench_import_{os.getpid()}", "tenant": "bench"}
        upgrade(PG_URL, options["schema"])
    print(f"store {args.store}, sources {args.src}, load average {os.getloadavg()[0]:.1f}")
    for n in args.entries:
        src = pi_file(args.data, n, args.seed)
        where = Path(tempfile.mkdtemp(prefix="import-", dir=args.data))
        url = store_url(args.store, where)
        try:
            if args.cli:
                cmd = [sys.executable, "-m", "threadline", "--store", url, "import", "pi"]
                wall, rss, _ = run([*cmd, str(src), "--session-id", "bench"], env)
                print(
                    f"{n:>9,} entries  cli      {wall:7.1f} s  {n / wall:9,.0f} entries/s  "
                    f"peak RSS {rss:6,} MB"
                )
            else:
                child = [sys.executable, "-c", _IMPORT, url, str(src), json.dumps(options)]
                wall, rss, out = run(child, env)
                got = json.loads(out.strip().splitlines()[-1])
                assert got["entries"] == n, got
                print(
                    f"{n:>9,} entries  import   {got['seconds']:7.1f} s  "
                    f"{n / got['seconds']:9,.0f} entries/s  peak RSS {rss:6,} MB  "
                    f"(process {wall:.1f} s)"
                )
                if args.store != "postgres":  # PostgreSQL's catalog reads the records' table
                    wall, rss, out = run([sys.executable, "-c", _CATALOG, url], env)
                    got = json.loads(out.strip().splitlines()[-1])
                    print(
                        f"{n:>9,} entries  catalog  {got['seconds']:7.1f} s  "
                        f"{got['messages']:,} messages indexed  peak RSS {rss:6,} MB"
                    )
        finally:
            shutil.rmtree(where, ignore_errors=True)
    if args.store == "postgres":
        import psycopg
        from psycopg import sql

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(options["schema"]))
            conn.execute(drop)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
