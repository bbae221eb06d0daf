-- threadline SQLite store, schema version 4: records kept packed (issue 16).
-- A row's raw held the record's JSON whole, though its first four members (type, id,
-- parent_id, timestamp) are the row's own columns: a LangGraph thread's rows took 2.8x its
-- messages' JSON. From this version a row written keeps raw packed, its first byte saying how
-- (threadline.store.sqlite.pack): the JSON after those members (rebuilt from the columns when
-- the row is read), deflated with a preset dictionary of threadline's JSON, or the whole JSON
-- deflated when its members are not spelled as threadline spells them. json_bytes holds the
-- JSON's length for such a row (the lazy load lays rows end to end by it); NULL when raw is the
-- JSON itself, as in every row written before this version (read as they are, packed when a
-- rewrite writes them again) and in a purged record's row (found by its mark in raw).

ALTER TABLE tl_records ADD COLUMN json_bytes INTEGER;
