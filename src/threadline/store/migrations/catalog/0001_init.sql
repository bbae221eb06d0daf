-- threadline catalog (SQLite), version 1: index cursors, searchable messages, vectors, session
-- tags and manage_tags preview tokens.
CREATE TABLE IF NOT EXISTS cat_sessions (
    session_id TEXT PRIMARY KEY,
    cursor     TEXT NOT NULL DEFAULT ''      -- how far the session was indexed (backend-defined)
);

CREATE TABLE IF NOT EXISTS cat_messages (
    rowid      INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: vectors follow row ids
    session_id TEXT NOT NULL,
    entry_id   TEXT NOT NULL,
    role       TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    body       TEXT NOT NULL,               -- searchable text: text, tool calls, tool results
    etext      TEXT,                        -- what is embedded: the text blocks (NULL: none)
    UNIQUE (session_id, entry_id)
);
CREATE INDEX IF NOT EXISTS cat_messages_time ON cat_messages (timestamp);

CREATE VIRTUAL TABLE IF NOT EXISTS cat_fts USING fts5(
    body, content='cat_messages', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS cat_messages_ai AFTER INSERT ON cat_messages BEGIN
    INSERT INTO cat_fts (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER IF NOT EXISTS cat_messages_ad AFTER DELETE ON cat_messages BEGIN
    INSERT INTO cat_fts (cat_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
    DELETE FROM cat_vectors WHERE msg_rowid = old.rowid;
END;

CREATE TABLE IF NOT EXISTS cat_vectors (
    msg_rowid INTEGER PRIMARY KEY,
    model     TEXT NOT NULL,
    vec       BLOB NOT NULL                 -- float32, L2-normalised
);

-- Session tags are not derived from the sessions: a rebuild keeps them.
CREATE TABLE IF NOT EXISTS cat_tags (
    session_id TEXT NOT NULL,
    tag        TEXT NOT NULL,
    PRIMARY KEY (session_id, tag)
);
CREATE INDEX IF NOT EXISTS cat_tags_tag ON cat_tags (tag);

CREATE TABLE IF NOT EXISTS cat_tokens (
    token       TEXT PRIMARY KEY,
    operation   TEXT NOT NULL,
    args        TEXT NOT NULL,              -- JSON
    session_ids TEXT NOT NULL,              -- JSON list: the exact previewed set
    created     TEXT NOT NULL
);
