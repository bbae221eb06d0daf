"""Crash trials for the JSONL store (DESIGN §3): a writer child killed with SIGKILL mid-stream.

The child (``python _crash_writer.py DIR SESSION SEED``) appends to one session with its writes
slowed and capped to a few bytes per ``write`` call (``threadline.store.jsonl._write`` is replaced),
so records tear when the process dies. It prints ``try`` before each operation and ``ack`` after the
call returned; an acknowledged entry must survive. Odd seeds kill the child from inside a partial
write (a guaranteed torn record); even seeds kill it from the parent after a random delay (the kill
lands anywhere: mid-record, between write and fdatasync, before the ack is printed). Every tenth
trial the child also creates the session itself, so a kill can land inside ``create``. Seeds
ending in 5-8 also write batches of 2-10 messages inside ``Session.batch()`` (acknowledged
together once the block exited: the kill may land inside one), and seeds ending in 7-8 use
``durability="group"``.

:func:`run_trial` is the parent side, shared by tests/test_crash.py (100 trials) and
bench/crash_trials.py (1,000): it raises AssertionError naming the seed on any violation.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"
ALPHABET = 'abc xyz\u2028\u00e9\u4e2d\U0001f600"\\\n\t{}'


def body(seed: int, i: int) -> str:
    """The text of operation ``i`` of trial ``seed`` (multi-byte characters, U+2028, escapes)."""
    rng = random.Random(seed * 1_000_003 + i)
    n = rng.choice([0, 1, 5, 40, 200, 900])
    return f"{seed}/{i}:" + "".join(rng.choice(ALPHABET) for _ in range(n))


def creates_itself(seed: int) -> bool:
    return seed % 10 in (3, 4)


def self_kills(seed: int) -> bool:
    return seed % 2 == 1


def batches(seed: int) -> bool:
    return seed % 10 in (5, 6, 7, 8)


def durability(seed: int) -> str:
    return "group" if seed % 10 in (7, 8) else "fsync"


# -- child -------------------------------------------------------------------------------------


def child(directory: str, sid: str, seed: int, kill_at_call: int | None = None) -> None:
    import threadline as tl
    import threadline.store.jsonl as jsonl

    rng = random.Random(seed)
    write_rng = random.Random(seed + 7)
    cap = rng.choice([1, 3, 7, 16, 64])
    kill_at = rng.randint(1, 800) if self_kills(seed) else None
    if kill_at_call is not None:  # die at the first partial write from this call on
        kill_at = kill_at_call
    calls = 0
    real_write = os.write

    def slow_write(fd: int, data: Any) -> int:
        nonlocal calls
        calls += 1
        n = min(len(data), write_rng.randint(1, cap))
        time.sleep(0.0001)
        written = real_write(fd, bytes(data[:n]))
        if kill_at is not None and calls >= kill_at and written < len(data):
            os.kill(os.getpid(), signal.SIGKILL)  # dies with part of a record on disk
        return written

    jsonl._write = slow_write
    store = tl.open_store(directory, durability=durability(seed))  # type: ignore[arg-type]

    def say(*parts: object) -> None:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()

    if creates_itself(seed):
        say("ready")
        s = store.create(session_id=sid)
        s.append_message("user", body(seed, -1))
        say("created")
    else:
        s = store.open(sid)
        say("ready")
    acked: list[str] = [e.id for e in s.entries()]
    for i in range(100_000):
        r = rng.random()
        if batches(seed) and acked and rng.random() < 0.3:
            k = rng.randint(2, 10)
            say("try", i, "batch", k)
            with s.batch():
                got = [s.append_message("user", body(seed, i * 1000 + j)) for j in range(k)]
            # acknowledged: the block synced them. One write for all the acks (a pipe write
            # under PIPE_BUF is whole or absent), so a kill cannot fall between them
            sys.stdout.write(
                "".join(f"ack {i * 1000 + j} message {eid} -\n" for j, eid in enumerate(got))
            )
            sys.stdout.flush()
            acked.extend(got)
        elif r < 0.7 or not acked:
            say("try", i, "message", "-")
            eid = s.append_message("user" if i % 2 else "assistant", body(seed, i))
            say("ack", i, "message", eid, "-")
            acked.append(eid)
        elif r < 0.8:
            target = rng.choice(acked)
            say("try", i, "label", target)
            eid = s.set_label(target, f"L{i}")
            say("ack", i, "label", eid, target)
            acked.append(eid)
        elif r < 0.95:
            target = rng.choice(acked)
            say("try", i, "leaf", target)
            s.branch(target)
            say("ack", i, "leaf", "-", target)
        else:
            say("try", i, "leaf", "-")
            s.reset_leaf()
            say("ack", i, "leaf", "-", "-")


# -- parent ------------------------------------------------------------------------------------


@dataclass
class TrialResult:
    seed: int
    acked: int = 0
    torn_bytes: int = 0
    exists: bool = True  # False when the kill landed inside create(): no session at all
    extra_entry: bool = False
    notes: list[str] = field(default_factory=list)


def _fail(seed: int, what: str) -> AssertionError:
    return AssertionError(f"crash trial seed={seed}: {what}")


def spawn_writer(
    store_dir: Path, sid: str, seed: int, kill_at_call: int | None = None
) -> subprocess.Popen[bytes]:
    """Start the child writer and wait until it has the session open."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # unbuffered: readline() must not swallow lines that communicate() (raw reads) never sees
    extra = [] if kill_at_call is None else [str(kill_at_call)]
    proc = subprocess.Popen(
        [sys.executable, str(HERE), str(store_dir), sid, str(seed), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    if first != b"ready\n":
        proc.kill()
        raise _fail(seed, f"child did not start: {first!r} {proc.stderr.read()!r}")
    return proc


def run_trial(directory: Path, seed: int) -> TrialResult:
    """One crash trial in ``directory``; raises AssertionError on any lost or corrupt entry."""
    import threadline as tl

    rng = random.Random(seed ^ 0x5EED)
    store_dir = directory / "store"
    store = tl.open_store(store_dir)
    sid = f"crash-{seed}"
    seed_id = None
    if not creates_itself(seed):
        with store.create(session_id=sid) as s:
            seed_id = s.append_message("user", body(seed, -1))
    proc = spawn_writer(store_dir, sid, seed)
    if not self_kills(seed):
        time.sleep(rng.uniform(0, 0.045))
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    if proc.returncode != -signal.SIGKILL:
        raise _fail(seed, f"child exited with {proc.returncode}, stderr: {err.decode()[-2000:]}")
    return verify(store, sid, seed, seed_id, out)


def verify(store: Any, sid: str, seed: int, seed_id: str | None, out: bytes) -> TrialResult:
    """Check the session against what the child acknowledged on stdout."""
    import threadline as tl

    result = TrialResult(seed=seed)
    lines = [ln.decode().split(" ") for ln in out.split(b"\n")[:-1]]  # a torn print is dropped
    if creates_itself(seed) and ["created"] not in lines and not store.exists(sid):
        result.exists = False
        if [r for r in store.list() if r.id == sid]:
            raise _fail(seed, "list() shows a session that does not exist")
        return result  # the kill landed inside create(): no session, nothing acknowledged
    s = store.open(sid)
    header_entries = [e.id for e in s.entries()]
    if seed_id is None:  # the child created it; its first message was acknowledged by "created"
        if ["created"] in lines and len(header_entries) < 1:
            raise _fail(seed, "the created session lost its first message")
        seed_id = header_entries[0] if header_entries else None
    report = s.load_report
    if (
        report.corrupt_lines
        or report.duplicate_ids
        or report.orphans
        or report.cycles
        or report.unknown_leaf
    ):
        raise _fail(seed, f"load report is not clean: {report}")

    # replay the acknowledged operations on a model of the session
    expected: dict[str, tuple[str, str | None, str]] = {}
    if seed_id is not None:
        expected[seed_id] = ("message", None, body(seed, -1))
    leaf: str | None = seed_id
    pending: list[str] | None = None
    batch_left = 0  # the acks still owed for the batch in flight (an older child printed each)
    for parts in lines:
        if parts[0] == "try":
            pending = parts
            batch_left = int(parts[3]) if parts[2] == "batch" else 0
        elif parts[0] == "ack":
            _, i, kind, eid, target = parts
            if kind == "message":
                expected[eid] = ("message", leaf, body(seed, int(i)))
                leaf = eid
            elif kind == "label":
                expected[eid] = ("label", leaf, target)
                leaf = eid
            else:
                leaf = None if target == "-" else target
            batch_left -= 1
            if batch_left <= 0:
                pending = None
            result.acked += 1

    for eid, (kind, parent, value) in expected.items():
        if not s.has_entry(eid):
            raise _fail(seed, f"acknowledged {kind} {eid} was lost")
        rec = s.entry(eid)
        if rec.type != kind or rec.parent_id != parent:
            chain = [(e.id[:8], (e.parent_id or "-")[:8], e.type) for e in s.entries()]
            raise _fail(
                seed,
                f"{eid}: expected {kind} under {parent}, got {rec.type} under "
                f"{rec.parent_id}; file: {chain}; child said: {lines}",
            )
        got = rec.message.text if kind == "message" else rec.label.target_id
        if got != value:
            raise _fail(seed, f"{eid}: content changed: {got!r} != {value!r}")

    extra = [e for e in s.entries() if e.id not in expected]
    allowed_leaves: set[str | None] = {leaf}
    if pending is not None and pending[2] == "leaf":
        allowed_leaves.add(None if pending[3] == "-" else pending[3])
    if pending is not None and pending[2] == "batch":
        result.notes.append(f"killed inside a batch of {pending[3]}, {len(extra)} landed")
    if extra and pending is not None and pending[2] == "batch":
        # the batch in flight: any prefix of its unacknowledged messages may have landed
        i, k = int(pending[1]), int(pending[3])
        if len(extra) > batch_left:
            raise _fail(seed, f"{len(extra)} unacknowledged entries for a batch of {k}")
        parent = leaf
        for j, x in enumerate(extra, k - batch_left):
            if (
                x.type != "message"
                or x.parent_id != parent
                or x.message.text != body(seed, i * 1000 + j)
            ):
                raise _fail(
                    seed,
                    f"in-flight batch entry {x.id} is not message {j} of the batch under {parent}",
                )
            parent = x.id
        allowed_leaves.add(parent)
        result.extra_entry = True
    elif extra:
        # only the operation in flight may have landed without its ack
        if len(extra) > 1 or pending is None or pending[2] == "leaf":
            raise _fail(seed, f"unexpected entries {[e.id for e in extra]} (in flight: {pending})")
        (x,) = extra
        if x.type != pending[2] or x.parent_id != leaf:
            raise _fail(seed, f"in-flight entry {x.id} is a {x.type} under {x.parent_id}")
        if x.type == "message" and x.message.text != body(seed, int(pending[1])):
            raise _fail(seed, f"in-flight entry {x.id} has the wrong text")
        allowed_leaves.add(x.id)
        result.extra_entry = True
    if s.leaf_id not in allowed_leaves:
        chain = [(e.id[:8], (e.parent_id or "-")[:8], e.type) for e in s.entries()]
        raise _fail(
            seed, f"leaf {s.leaf_id} not in {allowed_leaves}; file: {chain}; child said: {lines}"
        )

    # appending after the crash: the torn tail moves aside, the new entry survives a reopen
    path = Path(store.url) / f"{sid}.jsonl"
    raw = path.read_bytes()
    torn = raw[raw.rfind(b"\n") + 1 :]
    result.torn_bytes = len(torn)
    if report.torn_bytes != len(torn):
        raise _fail(seed, f"load reported {report.torn_bytes} torn bytes, the file has {len(torn)}")
    loaded_leaf = s.leaf_id
    after = s.append_message("user", "after the crash")
    s.close()
    torn_file = path.with_name(path.name + ".torn")
    if torn:
        if torn_file.read_bytes() != torn + b"\n":
            raise _fail(seed, "the .torn file does not hold the torn tail")
    elif torn_file.exists():
        raise _fail(seed, "a .torn file appeared without a torn tail")
    if path.read_bytes()[: len(raw) - len(torn)] != raw[: len(raw) - len(torn)]:
        raise _fail(seed, "the complete lines changed during repair")
    again = tl.open_store(store.url).open(sid)
    if not again.load_report.clean:
        raise _fail(seed, f"after repair the load report is {again.load_report}")
    if again.leaf_id != after or again.entry(after).parent_id != loaded_leaf:
        raise _fail(seed, "the append after the crash did not survive a reopen")
    if not all(again.has_entry(eid) for eid in expected):
        raise _fail(seed, "an acknowledged entry was lost after the repair")
    if [r.id for r in store.list()] != [sid]:
        raise _fail(seed, "list() does not show the session")
    return result


if __name__ == "__main__":
    child(
        sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None
    )
