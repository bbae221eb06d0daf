"""Crash trials of the SQLite store: a writer SIGKILLed at a random moment.

    .venv/bin/python bench/crash_trials_sqlite.py [--trials 200] [--start 0]

Each trial: a child process opens ``sqlite:///<tmp>/store.db`` (``durability="fsync"``), creates
a session and appends messages of 0 B to 6 KB (the sizes the records table lays out
differently: inline, spilling, overflowing), one by one and in ``append_records`` batches of 2-8,
and every 12th operation purges an earlier message (a rewrite: all records deleted and written
again in one transaction). It prints ``try`` before each operation and ``ack`` after it
returned. The parent kills it with SIGKILL after a random delay, then checks: the database
passes ``PRAGMA integrity_check``; the session opens; every acknowledged message is there, in
order, except those whose purge was acknowledged (those are gone, their text in no file, nor
the bytes of their packed rows, which the child prints: schema version 4 keeps it deflated); an
operation in flight left all of itself or nothing; an append after the crash survives a reopen.
Exits 1 on the first failing trial, naming its seed (rerun one with ``--start SEED --trials 1``).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = """
import random, sys
import threadline as tl
from threadline.model.content import Message, text
from threadline.model.entries import MessageEntry, encode, new_id, now
from threadline.store.sqlite import envelope, pack
db, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
st = tl.open_store(f"sqlite:///{db}", durability="fsync")
s = st.create()
print("session", s.id, flush=True)
mine, tags = [], {}
for op in range(100000):
    if op % 12 == 11 and len(mine) > 3:
        victim = mine.pop(rng.randrange(len(mine) - 1))
        print("try purge", victim, tags[victim], flush=True)
        s.purge([victim], dry_run=False)
        print("ack purge", victim, tags[victim], flush=True)
        continue
    n = 1 if rng.random() < 0.6 else rng.randint(2, 8)
    parent, recs = s.leaf_id, []
    for k in range(n):
        tag = f"<{seed}/{op}/{k}>"
        body = tag + "x" * rng.choice([0, 40, 700, 1100, 2100, 3900, 6000])
        rec = MessageEntry(id=new_id(), parent_id=parent, timestamp=now(),
                           message=Message(role="user", content=[text(body)]))
        recs.append(rec)
        tags[rec.id] = tag
        parent = rec.id
        line = encode(rec)
        print("packed", rec.id, pack(line, envelope(line))[0].hex(), flush=True)
    print("try", *[r.id for r in recs], flush=True)
    s.append_records(recs)
    print("ack", *[r.id for r in recs], flush=True)
    mine.extend(r.id for r in recs)
"""


def trial(directory: Path, seed: int) -> dict[str, int]:
    db = directory / "store.db"
    env = dict(os.environ, PYTHONPATH=str(SRC), THREADLINE_EMBEDDER="none")
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(seed)], stdout=subprocess.PIPE, env=env
    )
    time.sleep(random.Random(seed).uniform(0.8, 2.5))  # the first ~0.7 s is the import
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    lines = out.decode().split("\n")[:-1]  # a line the kill cut short was never said
    if not lines or not lines[0].startswith("session "):
        return {"no_session": 1}
    sid = lines[0].split()[1]
    acked: list[str] = []
    purged: dict[str, str] = {}  # acknowledged purges: id -> the tag its text began with
    packed: dict[str, bytes] = {}  # id -> its row's raw (the text deflated: the tag is not in it)
    in_flight: list[str] = []
    purge_in_flight = False
    for line in lines[1:]:
        word, *ids = line.split()
        if word == "packed":
            packed[ids[0]] = bytes.fromhex(ids[1])
        elif word == "try":
            purge_in_flight = ids[0] == "purge"
            in_flight = [] if purge_in_flight else ids
        elif ids[0] == "purge":
            purged[ids[1]] = ids[2]
            purge_in_flight = False
        else:
            acked.extend(ids)
            in_flight = []

    def fail(what: str) -> AssertionError:
        return AssertionError(f"seed {seed}: {what}")

    conn = sqlite3.connect(db)
    check = conn.execute("PRAGMA integrity_check").fetchone()
    conn.close()
    if check != ("ok",):
        raise fail(f"integrity_check says {check}")
    import threadline as tl
    from threadline.model.entries import PurgedEntry

    st = tl.open_store(f"sqlite:///{db}")
    try:
        s = st.open(sid)
        have = s.entry_ids()
        if have[: len(acked)] != acked:
            raise fail(f"acknowledged entries lost or out of order: {acked} vs {have}")
        extra = have[len(acked) :]
        if extra not in ([], in_flight):
            raise fail(f"part of the operation in flight landed: {extra} of {in_flight}")
        for victim in purged:
            if not isinstance(s.entry(victim), PurgedEntry):
                raise fail(f"the acknowledged purge of {victim} was undone")
        after = s.append_message("user", "after the crash")
        s.close()
        again = st.open(sid, read_only=True)
        if again.entry_ids() != [*have, after]:
            raise fail("the append after the crash did not survive a reopen")
    finally:
        st.close()
    leftovers = b"".join(p.read_bytes() for p in directory.glob("store.db*") if p.is_file())
    alive = [i for i in acked if i not in purged]
    if alive and packed[alive[-1]] not in leftovers:  # else the check below proves nothing
        raise fail(f"the packed row of {alive[-1]} is in no database file")
    for victim, tag in purged.items():
        if tag.encode() in leftovers or packed[victim] in leftovers:
            raise fail(f"the text of purged {victim} is still in the database files")
    return {
        "acked": len(acked),
        "purges_acked": len(purged),
        "in_flight_landed": int(bool(extra)),
        "in_flight": int(bool(in_flight)),
        "purge_in_flight": int(purge_in_flight),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    sys.path.insert(0, str(SRC))
    t0 = time.perf_counter()
    totals: dict[str, int] = {}
    for seed in range(args.start, args.start + args.trials):
        with tempfile.TemporaryDirectory(prefix="crash-sqlite-") as tmp:
            try:
                got = trial(Path(tmp), seed)
            except AssertionError as exc:
                print(f"FAILED: {exc}", file=sys.stderr)
                return 1
        for k, v in got.items():
            totals[k] = totals.get(k, 0) + v
        if (seed - args.start + 1) % 25 == 0:
            print(
                f"{seed - args.start + 1} trials ok ({time.perf_counter() - t0:.1f} s)", flush=True
            )
    print(
        f"{args.trials} trials, 0 failures in {time.perf_counter() - t0:.1f} s: "
        f"{totals.get('acked', 0)} acknowledged messages, none lost; "
        f"{totals.get('purges_acked', 0)} acknowledged purges, none undone; "
        f"{totals.get('in_flight', 0)} kills with an append in flight "
        f"({totals.get('in_flight_landed', 0)} landed whole, the rest not at all); "
        f"{totals.get('purge_in_flight', 0)} kills inside a purge; "
        f"{totals.get('no_session', 0)} kills before the session existed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
