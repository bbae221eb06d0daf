"""Server CPU and bytes of single-row inserts into ``tl_records`` layouts (issue 16).

    .venv/bin/python bench/pg_insert_layouts.py [--rows 1000] [--rounds 6]

Tables in a scratch schema of the ``test`` database (``$THREADLINE_BENCH_PG``), each with the
store's columns and indexes of one layout: version 3 (a stored ``tsv`` and a full ``etext``, GIN
on ``tsv``), version 4 with ``body`` stored (GIN on ``to_tsvector('english', body)``, with fast
update, a 128 kB or 512 kB pending list, or none), and version 4 with ``body`` ``''`` read from
the JSON by ``tl_body`` as a SQL function or in PL/pgSQL (as shipped). Every round inserts the
same ~90-word messages (random words of a 5,000-word vocabulary) into every table, one prepared
statement a row, in alternating order; reported: the backend's CPU per insert (``/proc``, so
the server must run on this machine) and each table's bytes. The schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import uuid
from pathlib import Path

import psycopg

URL = os.environ.get("THREADLINE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
TICK = os.sysconf("SC_CLK_TCK")
COLUMNS = (
    "tenant_id text NOT NULL, session_id text NOT NULL, seq bigint NOT NULL, id text, "
    "parent_id text, type text NOT NULL, timestamp text, raw bytea NOT NULL, role text, "
    "body text, etext text"
)
DERIVE = (
    "SELECT left(string_agg(b.value -> 'text' ->> 'content', E'\\n' ORDER BY b.n), 20000) "
    "FROM jsonb_array_elements(convert_from(raw, 'UTF8')::jsonb -> 'message' -> 'content') "
    "WITH ORDINALITY AS b(value, n) WHERE b.value -> 'text' ->> 'content' <> ''"
)
SETUP = f"""
CREATE FUNCTION body_sql(raw bytea, body text) RETURNS text LANGUAGE sql IMMUTABLE AS
    $fn$ SELECT CASE WHEN body = '' THEN ({DERIVE}) ELSE body END $fn$;
CREATE FUNCTION body_pl(raw bytea, body text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS
    $fn$ BEGIN IF body IS DISTINCT FROM '' THEN RETURN body; END IF; RETURN ({DERIVE}); END $fn$;
"""
# name -> (stored tsv and full etext, GIN expression, GIN options, body '' for text messages)
LAYOUTS = {
    "version 3": (True, "tsv", "", False),
    "v4 body, fast update": (False, "to_tsvector('english', body)", "", False),
    "v4 body, list 128 kB": (
        False,
        "to_tsvector('english', body)",
        "WITH (gin_pending_list_limit = 128)",
        False,
    ),
    "v4 body, list 512 kB": (
        False,
        "to_tsvector('english', body)",
        "WITH (gin_pending_list_limit = 512)",
        False,
    ),
    "v4 body, fastupdate off": (
        False,
        "to_tsvector('english', body)",
        "WITH (fastupdate = off)",
        False,
    ),
    "v4 '', SQL function": (False, "to_tsvector('english', body_sql(raw, body))", "", True),
    "v4 '', PL/pgSQL": (False, "to_tsvector('english', body_pl(raw, body))", "", True),
}


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000, help="rows per table per round")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    schema = f"pglayouts_{os.getpid()}"
    rnd = random.Random(1)
    vocab = [
        "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=rnd.randint(3, 10)))
        for _ in range(5000)
    ]
    conn = psycopg.connect(URL, autocommit=True)
    conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("SET synchronous_commit TO off")
        conn.execute(SETUP.encode())
        tables = {}
        for i, (name, (v3, expr, opts, _derive)) in enumerate(LAYOUTS.items()):
            t = f"t{i}"
            tsv = (
                ", tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(body, ''))) "
                "STORED"
                if v3
                else ""
            )
            conn.execute(
                f"CREATE TABLE {t} ({COLUMNS}{tsv}, PRIMARY KEY (tenant_id, session_id, seq))"
            )
            part = "" if v3 else " WHERE role IS NOT NULL"
            conn.execute(f"CREATE INDEX ON {t} (tenant_id, session_id, id){part}")
            conn.execute(f"CREATE INDEX ON {t} USING gin ({expr}) {opts} WHERE body IS NOT NULL")
            tables[name] = t
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        seq = dict.fromkeys(LAYOUTS, 0)
        spent = dict.fromkeys(LAYOUTS, 0.0)
        for r in range(args.rounds):
            texts = [" ".join(rnd.choices(vocab, k=90)) for _ in range(args.rows)]
            order = list(LAYOUTS) if r % 2 == 0 else list(reversed(LAYOUTS))
            for name in order:
                v3, _expr, _opts, derive = LAYOUTS[name]
                c0 = backend_cpu(pid)
                for body in texts:
                    seq[name] += 1
                    eid = str(uuid.uuid4())
                    raw = json.dumps(
                        {
                            "type": "message",
                            "id": eid,
                            "parent_id": "p",
                            "timestamp": "2026-11-25T16:00:00.000Z",
                            "message": {
                                "role": "user",
                                "content": [{"type": "text", "text": {"content": body}}],
                            },
                        }
                    ).encode()
                    conn.execute(
                        f"INSERT INTO {tables[name]} (tenant_id, session_id, seq, id, parent_id, "
                        "type, timestamp, raw, role, body, etext) VALUES ('bench', 's', %s, %s, "
                        "'p', 'message', 'x', %s, 'user', %s, %s)",
                        (seq[name], eid, raw, "" if derive else body, body if v3 else None),
                        prepare=True,
                    )
                spent[name] += backend_cpu(pid) - c0
        conn.execute("CHECKPOINT")
        n = args.rows * args.rounds
        print(f"load average {os.getloadavg()[0]:.1f}; {n} inserts a table")
        print(f"  {'layout':<26} {'server CPU µs':>13} {'table+TOAST':>12} {'GIN':>10}")
        for name, t in tables.items():
            total, heap = conn.execute(
                "SELECT pg_total_relation_size(%s::regclass) - pg_indexes_size(%s::regclass), "
                "(SELECT sum(pg_relation_size(indexrelid)) FROM pg_index i JOIN pg_am a ON "
                "a.oid = (SELECT relam FROM pg_class WHERE oid = i.indexrelid) WHERE "
                "indrelid = %s::regclass AND a.amname = 'gin')",
                (t, t, t),
            ).fetchone()  # type: ignore[misc]
            print(f"  {name:<26} {spent[name] / n * 1e6:13.0f} {total:12,} {int(heap):10,}")
    finally:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.close()


if __name__ == "__main__":
    main()
