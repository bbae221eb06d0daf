-- threadline PostgreSQL store, schema version 4: a message's text is stored once beside its JSON
-- (issue 16). Version 1 kept it up to four times in tl_records: raw (the JSON), body (the
-- searchable text), etext (the text embedded) and tsv (a STORED tsvector of body), plus the GIN
-- index on tsv. Now:
-- * the GIN index is on the expression to_tsvector('english', body) itself, and the column tsv is
--   gone: the catalog's queries name that expression (the index serves them exactly as it served
--   tsv @@ ...), and ts_rank_cd computes the vector of the rows that matched. It keeps GIN's
--   fast update (appends put their words in a pending list, merged into the index's trees by
--   VACUUM or at gin_pending_list_limit): a bounded overhead in bytes, and the cheaper append
--   (docs/stores.md has both figures);
-- * etext is NULL when the text to embed is left(body, 1000) (a message of text blocks only:
--   its text, cut at the embedder's limit, is body's start), '' when the message has nothing to
--   embed (tool calls or results only), and the text itself otherwise;
-- * tl_records_id, the (tenant_id, session_id, id) lookup of the catalog, holds the rows that
--   have a role (messages not purged) only: the catalog looks up messages by id, never the
--   other records, and a purge blanks the role (the lazy load spots a purged message by it).
-- The UPDATE rewrites the message rows without tsv; the old row versions' space is reused by
-- later rows (VACUUM), and 'threadline db scrub URL' (VACUUM FULL) gives it back to the file
-- system.

DROP INDEX tl_records_tsv;
ALTER TABLE tl_records DROP COLUMN tsv;
UPDATE tl_records SET etext = CASE WHEN etext IS NULL THEN '' WHEN etext = left(body, 1000)
    THEN NULL ELSE etext END
    WHERE body IS NOT NULL;
CREATE INDEX tl_records_text ON tl_records USING gin (to_tsvector('english', body))
    WHERE body IS NOT NULL;
DROP INDEX tl_records_id;
CREATE INDEX tl_records_id ON tl_records (tenant_id, session_id, id) WHERE role IS NOT NULL;
