-- threadline SQLite store, schema version 1: sessions, their records, writer leases.
CREATE TABLE IF NOT EXISTS tl_sessions (
    session_id     TEXT PRIMARY KEY,
    header         BLOB NOT NULL,          -- the encoded header line, as in a JSONL file
    created        TEXT NOT NULL,
    modified       TEXT NOT NULL,
    name           TEXT,
    message_count  INTEGER NOT NULL DEFAULT 0,
    first_message  TEXT,
    parent_session TEXT,
    generation     INTEGER NOT NULL DEFAULT 0,  -- bumped by every rewrite
    next_seq       INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS tl_sessions_modified ON tl_sessions (modified);

CREATE TABLE IF NOT EXISTS tl_records (
    session_id TEXT NOT NULL REFERENCES tl_sessions (session_id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT,
    parent_id  TEXT,
    type       TEXT NOT NULL,
    timestamp  TEXT,
    raw        BLOB NOT NULL,              -- the record's JSON exactly as written
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tl_records_id ON tl_records (session_id, id);

-- One row per session held for writing; a row whose process is gone is taken over.
CREATE TABLE IF NOT EXISTS tl_writers (
    session_id TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    acquired   TEXT NOT NULL
);
