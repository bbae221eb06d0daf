-- threadline SQLite store, schema version 2: tl_records becomes an ordinary (rowid) table.
-- Version 1 keyed it WITHOUT ROWID, which stores each row in an index b-tree: there a row over
-- about 1,000 bytes (with 4 KB pages) spills into an overflow page of its own, so a session of
-- 1-4 KB records took several times its JSON on disk. A rowid table keeps a row of up to about
-- 4,000 bytes on its leaf page and packs rows one after the other; (session_id, seq) stays
-- unique and indexed (the primary key, now an index beside the table), and so does (session_id,
-- id). Columns, constraints and the rows' bytes are unchanged.
-- The rebuild runs inside the migration's one transaction (threadline.store.sqlite.upgrade):
-- a crash leaves either version 1 whole or version 2 complete.

CREATE TABLE tl_records_v2 (
    session_id TEXT NOT NULL REFERENCES tl_sessions (session_id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    id         TEXT,
    parent_id  TEXT,
    type       TEXT NOT NULL,
    timestamp  TEXT,
    raw        BLOB NOT NULL,              -- the record's JSON exactly as written
    PRIMARY KEY (session_id, seq)
);
INSERT INTO tl_records_v2 (session_id, seq, id, parent_id, type, timestamp, raw)
    SELECT session_id, seq, id, parent_id, type, timestamp, raw
    FROM tl_records ORDER BY session_id, seq;
DROP TABLE tl_records;
ALTER TABLE tl_records_v2 RENAME TO tl_records;
CREATE INDEX tl_records_id ON tl_records (session_id, id);
