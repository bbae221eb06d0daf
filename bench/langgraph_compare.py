"""ThreadlineSaver vs LangGraph's SqliteSaver and PostgresSaver on the same graph (issue 16).

    .venv/bin/python bench/langgraph_compare.py [--sizes 1000 10000] [--pad 4] [--turns 20]

The graph is tests/_langgraph_chat.py (chat node with a scripted model + ToolNode; a turn adds 2
messages, or 4 when the model calls the tool). ``--pad`` repeats a ~120-byte sentence in every
message (4: messages of ~500-600 bytes as JSONL, the size the issue measured). For each saver,
side by side in one run:

1. size N reached by running the graph turn by turn (``--full`` sizes, default 1000): every
   checkpoint LangGraph writes along the way is stored, as in real use;
2. sizes reached by one ``update_state`` that puts N messages in a fresh thread (the others,
   default 10000: running 3,750 turns through SqliteSaver would store ~35 GB), then turns;

then it measures, at that history length: bytes on disk (the saver's files or tables), the mean
latency of ``--turns`` more turns (per turn and per checkpoint). At the end, the time a fresh
saver takes to load the latest checkpoint (``get_tuple``): ``--loads`` rounds in which every
saver of every size loads once, the median per saver. The messages' own size is
their LangChain JSON (``model_dump_json``), one per line.

``--floor``: after each threadline saver, its thread's final messages alone (no checkpoint) are
stored as a plain threadline session, one append each, in fresh storage of the same store: the
bytes no saver that keeps the thread readable as a session can go under. ``--prose
[REALDATA]``: the filler is successive slices of the real Claude Code transcripts' texts
(``$THREADLINE_REALDATA``, default ../shared/realdata) instead of one sentence repeated, which
deflates far better than real messages do.

PostgreSQL: the ``test`` database on 127.0.0.1 (``$THREADLINE_BENCH_PG``), a fresh schema per
saver, dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from _langgraph_chat import build, filler, use_prose, user  # noqa: E402

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMAS: list[str] = []


def pg_schema(tag: str) -> str:
    import psycopg

    schema = f"lgbench_{os.getpid()}_{tag}"
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    SCHEMAS.append(schema)
    return schema


def pg_bytes(schema: str) -> int:
    import psycopg

    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def pg_breakdown(schema: str) -> list[tuple[str, int]]:
    """Bytes of each relation of the schema: a table's main fork, its free space and visibility
    maps, its TOAST table (with the TOAST index), then each of its indexes."""
    import psycopg

    out: list[tuple[str, int]] = []
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        for oid, name, toast in conn.execute(
            "SELECT c.oid, c.relname, c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 2",
            (schema,),
        ).fetchall():
            for fork in ("main", "fsm", "vm"):
                out.append(
                    (
                        f"{name} {fork}",
                        conn.execute("SELECT pg_relation_size(%s, %s)", (oid, fork)).fetchone()[0],
                    )
                )
            if toast:
                out.append(
                    (
                        f"{name} TOAST",
                        conn.execute("SELECT pg_total_relation_size(%s)", (toast,)).fetchone()[0],
                    )
                )
            for idx, size in conn.execute(
                "SELECT i.indexrelid::regclass::text, pg_total_relation_size(i.indexrelid) "
                "FROM pg_index i WHERE i.indrelid = %s ORDER BY 1",
                (oid,),
            ).fetchall():
                out.append((f"{name} index {idx.split('.')[-1]}", size))
        # a record row's own cost: its tuple (header and key columns, pg_column_size of the row
        # without the JSON and text columns) and its line pointer, then its primary key entry
        rows, beside = conn.execute(
            "SELECT count(*), coalesce(sum(pg_column_size(t.*) - pg_column_size(t.raw) - "
            "coalesce(pg_column_size(t.body), 0) - coalesce(pg_column_size(t.etext), 0) + 4), 0) "
            f'FROM "{schema}".tl_records t'
        ).fetchone()
        out.append(("tl_records rows", rows))
        if rows:
            out.append(("… bytes a row beside raw, body, etext (mean)", beside // rows))
            pkey = conn.execute(
                f"SELECT pg_relation_size('\"{schema}\".tl_records_pkey')"
            ).fetchone()[0]
            out.append(("… bytes a row in tl_records_pkey (mean)", pkey // rows))
    return out


def sqlite_breakdown(path: Path) -> list[tuple[str, int]]:
    """Bytes of each b-tree of the database file (``dbstat``), the free pages, the WAL."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    out = [(str(n), int(b)) for n, b in rows] + [("free pages", free * page)]
    for extra in ("-wal", "-shm"):
        f = Path(str(path) + extra)
        if f.exists():
            out.append((f.name, f.stat().st_size))
    return out


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Saver:
    """One saver under test: ``open()`` yields a fresh saver on the same storage."""

    def __init__(
        self,
        name: str,
        opener: Callable[[], Any],
        size: Callable[[], int],
        breakdown: Callable[[], list[tuple[str, int]]] | None = None,
        floor: Callable[[list[Any]], int] | None = None,
    ) -> None:
        self.name = name
        self.opener = opener
        self.size = size
        self.breakdown = breakdown
        self.floor = floor  # bytes of the given messages alone, as a plain session (--floor)

    @contextmanager
    def open(self) -> Iterator[Any]:
        with self.opener() as saver:
            yield saver


def savers(root: Path, tag: str) -> list[Saver]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    import threadline as tl
    from threadline.integrations.langgraph import ThreadlineSaver
    from threadline.store.postgres import upgrade

    jsonl = root / f"tl-{tag}"
    tl_db = root / f"tl-{tag}.db"
    lg_db = root / f"lg-{tag}.db"
    tl_schema = pg_schema(f"tl{tag}")
    upgrade(URL, tl_schema)
    lg_schema = pg_schema(f"lg{tag}")
    lg_url = f"{URL}?options=-csearch_path%3D{lg_schema}"

    @contextmanager
    def tl_saver(url: str, **opts: Any) -> Iterator[Any]:
        store = tl.open_store(url, **opts)
        saver = ThreadlineSaver(store)
        try:
            yield saver
        finally:
            saver.close()
            store.close()

    def plain(messages: list[Any], url: str, size: Callable[[], int], **opts: Any) -> int:
        """The messages alone, no checkpoint, as a plain threadline session in fresh storage of
        the same store (one append per message, as a chat agent writes them): the floor any
        saver whose thread is a readable session stands on."""
        from threadline.formats import langchain as lc

        store = tl.open_store(url, **opts)
        try:
            session = store.create()
            for m in messages:
                session.append_message(lc.to_message(m))
        finally:
            store.close()
        return size()

    def plain_pg(messages: list[Any]) -> int:
        schema = pg_schema(f"pl{tag}")
        upgrade(URL, schema)
        return plain(messages, URL, lambda: pg_bytes(schema), tenant="bench", schema=schema)

    @contextmanager
    def sqlite_saver() -> Iterator[Any]:
        with SqliteSaver.from_conn_string(str(lg_db)) as saver:
            yield saver

    @contextmanager
    def postgres_saver() -> Iterator[Any]:
        with PostgresSaver.from_conn_string(lg_url) as saver:
            saver.setup()
            yield saver

    return [
        Saver(
            "ThreadlineSaver (JSONL)",
            lambda: tl_saver(str(jsonl)),
            lambda: dir_bytes(jsonl),
            floor=lambda ms: plain(
                ms, str(root / f"pl-{tag}"), lambda: dir_bytes(root / f"pl-{tag}")
            ),
        ),
        Saver(
            "ThreadlineSaver (SQLite)",
            lambda: tl_saver(f"sqlite:///{tl_db}"),
            lambda: sum(p.stat().st_size for p in root.glob(f"tl-{tag}.db*")),
            lambda: sqlite_breakdown(tl_db),
            floor=lambda ms: plain(
                ms,
                f"sqlite:///{root / f'pl-{tag}.db'}",
                lambda: sum(p.stat().st_size for p in root.glob(f"pl-{tag}.db*")),
            ),
        ),
        Saver(
            "ThreadlineSaver (PostgreSQL)",
            lambda: tl_saver(URL, tenant="bench", schema=tl_schema),
            lambda: pg_bytes(tl_schema),
            lambda: pg_breakdown(tl_schema),
            floor=plain_pg,
        ),
        Saver(
            "SqliteSaver",
            sqlite_saver,
            lambda: sum(p.stat().st_size for p in root.glob(f"lg-{tag}.db*")),
        ),
        Saver("PostgresSaver", postgres_saver, lambda: pg_bytes(lg_schema)),
    ]


def prose(realdata: Path) -> str:
    """The user and assistant texts of the real Claude Code transcripts in ``realdata``
    (../shared/realdata/claude_code: MANIFEST.md), each at least 80 characters, whitespace
    runs made single spaces, joined: English prose and code talk for --prose."""
    import json

    texts: dict[str, None] = {}
    for path in sorted((realdata / "claude_code").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                content = json.loads(line).get("message", {}).get("content")
            except (ValueError, AttributeError):
                continue
            parts = (
                [content]
                if isinstance(content, str)
                else [
                    b.get("text")
                    for b in content or ()
                    if isinstance(b, dict) and b.get("type") == "text"
                ]
            )
            for text in parts:
                if isinstance(text, str) and len(text) >= 80:
                    texts[" ".join(text.split())] = None
    if not texts:
        raise SystemExit(f"--prose: no Claude Code transcript texts under {realdata}/claude_code")
    return " ".join(texts)


def history(n: int, pad: int) -> list[Any]:
    """``n`` messages of a finished conversation (user, assistant, ...), bench-sized."""
    out: list[Any] = []
    for i in range(n // 2):
        out.append(HumanMessage(f"question p{i} {filler(pad)}", id=f"pre-user-{i}"))
        out.append(AIMessage(f"answer p{i}. {filler(pad)}", id=f"pre-ai-{i}"))
    return out


def timed_turns(
    graph: Any, saver: Any, config: dict[str, Any], first: int, turns: int, pad: int
) -> tuple[float, float]:
    """Over ``turns`` turns: the mean ms per turn (the whole graph: LangGraph's own work on
    the message list grows with it for every saver) and the ms the saver itself spends per
    checkpoint (its ``put`` and ``put_writes`` calls, divided by the checkpoints)."""
    puts = 0
    inside = 0.0
    put, put_writes = saver.put, saver.put_writes

    def timed_put(*args: Any, **kwargs: Any) -> Any:
        nonlocal puts, inside
        puts += 1
        t0 = time.perf_counter()
        try:
            return put(*args, **kwargs)
        finally:
            inside += time.perf_counter() - t0

    def timed_writes(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside
        t0 = time.perf_counter()
        try:
            return put_writes(*args, **kwargs)
        finally:
            inside += time.perf_counter() - t0

    saver.put, saver.put_writes = timed_put, timed_writes
    t0 = time.perf_counter()
    for turn in range(first, first + turns):
        graph.invoke({"messages": [user(turn, pad)]}, config, durability="sync")
    elapsed = time.perf_counter() - t0
    saver.put, saver.put_writes = put, put_writes
    return elapsed * 1000 / turns, inside * 1000 / max(puts, 1)


def measure(
    s: Saver,
    n: int,
    full: bool,
    pad: int,
    turns: int,
    floor: bool = False,
    text: str | None = None,
) -> dict[str, Any]:
    """One saver at ``n`` messages; ``floor``: also the messages alone (--floor); ``text``: the
    prose the messages are filled with (--prose), from its start for every saver."""
    config = {"configurable": {"thread_id": f"bench-{n}"}}
    if text is not None:
        use_prose(text)  # every saver gets the same messages
    with s.open() as saver:
        empty = s.size()  # the storage before the thread: its fixed part
        before = s.breakdown() if s.breakdown else []
        graph = build(saver, pad)
        t0 = time.perf_counter()
        if full:
            turn = 1
            early = None
            count = 0
            while count < n - 4:
                if turn == 11:
                    early = timed_turns(graph, saver, config, turn, turns, pad)
                    turn += turns
                state = graph.invoke({"messages": [user(turn, pad)]}, config, durability="sync")
                count = len(state["messages"])
                turn += 1
        else:
            graph.update_state(config, {"messages": history(n - 40, pad)}, as_node="agent")
            run = 1
            turn = 1
            for run in range(1, 11):
                graph.invoke({"messages": [user(run, pad)]}, config, durability="sync")
            turn = run + 1
            early = None
        build_s = time.perf_counter() - t0
        per_turn, per_cp = timed_turns(graph, saver, config, 10_000 + turn, turns, pad)
        messages = graph.get_state(config).values["messages"]
    jsonl = sum(len(m.model_dump_json()) + 1 for m in messages)
    size = s.size()
    return {
        "floor": s.floor(messages) if floor and s.floor else None,
        "saver": s.name,
        "n": len(messages),
        "mode": "turn by turn" if full else "prefill",
        "bytes": size,
        "empty": empty,
        "breakdown": (before, s.breakdown() if s.breakdown else []),
        "jsonl": jsonl,
        "ratio": size / jsonl,
        "turn_ms": per_turn,
        "cp_ms": per_cp,
        "early_cp_ms": early[1] if early else None,
        "build_s": build_s,
        "saver_under_test": s,
        "config": config,
        "loads": [],
    }


def load_once(row: dict[str, Any]) -> None:
    """One fresh saver on the row's storage loads its latest checkpoint (``get_tuple``)."""
    with row["saver_under_test"].open() as fresh:
        t0 = time.perf_counter()
        tup = fresh.get_tuple(row["config"])
        row["loads"].append((time.perf_counter() - t0) * 1000)
    assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == row["n"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument(
        "--full",
        type=int,
        nargs="*",
        default=[1000],
        help="sizes reached turn by turn (the others: by one update_state)",
    )
    ap.add_argument("--pad", type=int, default=4)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--only", nargs="*", default=None, help="savers whose name contains one")
    ap.add_argument("--loads", type=int, default=5, help="rounds of loads of the latest")
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="print the bytes of each relation (PostgreSQL) or b-tree (SQLite), empty and full",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also store each threadline saver's final messages alone, as a plain session",
    )
    ap.add_argument(
        "--prose",
        nargs="?",
        type=Path,
        const=Path(
            os.environ.get("THREADLINE_REALDATA", HERE.parent.parent / "shared" / "realdata")
        ),
        default=None,
        metavar="REALDATA",
        help="fill messages with real transcript text instead of one sentence repeated",
    )
    args = ap.parse_args()
    text = prose(args.prose) if args.prose else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for n in args.sizes:
                for s in savers(Path(tmp), str(n)):
                    if args.only and not any(o in s.name for o in args.only):
                        continue
                    row = measure(s, n, n in args.full, args.pad, args.turns, args.floor, text)
                    rows.append(row)
                    print(
                        f"{row['saver']:30} n={row['n']:6} {row['mode']:12} "
                        f"bytes={row['bytes']:>13,} ({row['ratio']:.2f}x JSONL) "
                        f"turn={row['turn_ms']:.1f}ms saver/cp={row['cp_ms']:.2f}ms "
                        f"build={row['build_s']:.0f}s empty={row['empty']:,} "
                        f"thread adds {(row['bytes'] - row['empty']) / row['jsonl']:.2f}x",
                        flush=True,
                    )
                    if row["floor"] is not None:
                        print(
                            f"{'':30} the same messages alone, a plain session: "
                            f"{row['floor']:,} bytes ({row['floor'] / row['jsonl']:.2f}x JSONL)",
                            flush=True,
                        )
                    if args.breakdown and row["breakdown"][1]:
                        empty_parts = dict(row["breakdown"][0])
                        for part, size in row["breakdown"][1]:
                            if size or empty_parts.get(part):
                                print(f"    {part:45} {empty_parts.get(part, 0):>10,} {size:>12,}")
            # loads last, taking turns (one load of each saver per round), so that a change in
            # the machine's load falls on every saver alike
            for _ in range(args.loads):
                for row in rows:
                    load_once(row)
            for row in rows:
                row["load_ms"] = statistics.median(row["loads"])
                print(
                    f"{row['saver']:30} n={row['n']:6} load latest: median {row['load_ms']:.1f}ms "
                    f"of {' '.join(f'{x:.0f}' for x in row['loads'])}",
                    flush=True,
                )
        finally:
            import psycopg

            with psycopg.connect(URL, autocommit=True) as conn:
                for schema in SCHEMAS:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print()
    print(
        "| saver | messages | history built | bytes on disk | × messages as JSONL | "
        f"saver ms per checkpoint | (turns 11-{10 + args.turns}) | graph ms per turn | "
        "load latest (ms) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        early = f"{r['early_cp_ms']:.2f}" if r["early_cp_ms"] is not None else "-"
        print(
            f"| {r['saver']} | {r['n']:,} | {r['mode']} | {r['bytes']:,} | {r['ratio']:.2f} | "
            f"{r['cp_ms']:.2f} | {early} | {r['turn_ms']:.1f} | {r['load_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
