-- threadline SQLite store, schema version 3: no (session_id, id) index on tl_records (issue 16).
-- No statement of the store looks a record up by its id (a session is read by (session_id,
-- seq), the catalog keeps its own tables), yet the index took about a third of the bytes of a
-- LangGraph thread's JSON (a UUID and the session's UUID per record, in pages half full since
-- ids arrive in random order). The rows are unchanged.

DROP INDEX IF EXISTS tl_records_id;
