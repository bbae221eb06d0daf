-- threadline PostgreSQL store, schema version 4: a message's text is stored once beside its JSON
-- (issue 16). Version 1 kept it up to four times in tl_records: raw (the JSON), body (the
-- searchable text), etext (the text embedded) and tsv (a STORED tsvector of body), plus the GIN
-- index on tsv. Now:
-- * the GIN index is on the expression to_tsvector('english', tl_body(raw, body)), and tsv is
--   gone: the catalog's queries name that expression (the index serves them exactly as it served
--   tsv @@ ...), and ts_rank_cd computes the vector of the rows that matched. It keeps GIN's
--   fast update (appends put their words in a pending list, merged into the index's trees by
--   VACUUM or at gin_pending_list_limit): a bounded overhead in bytes, and the cheaper append
--   (docs/stores.md has both figures);
-- * etext is NULL when the text to embed is left(body, 1000) (a message of text blocks only:
--   its text, cut at the embedder's limit, is body's start), '' when the message has nothing to
--   embed (tool calls or results only), and the text itself otherwise;
-- * body is '' when it is the message's text blocks as they stand in the JSON (tl_body, below,
--   reads them from raw: a message of text blocks only, nearly every message); the text is
--   then stored once, in raw. NULL still means no text (or purged);
-- * tl_records_id, the (tenant_id, session_id, id) lookup of the catalog, holds the rows that
--   have a role (messages not purged) only: the catalog looks up messages by id, never the
--   other records, and a purge blanks the role (the lazy load spots a purged message by it).
-- The UPDATE rewrites the message rows without tsv (and mostly without body); the old row
-- versions' space is reused by later rows (VACUUM), and 'threadline db scrub URL' (VACUUM FULL)
-- gives it back to the file system.

-- body, or (body = '') the text blocks of the JSON: the non-empty text.content strings of the
-- elements of message.content, joined by newlines, cut at 20,000 characters (BODY_LIMIT). The
-- store writes '' only when that is the body exactly (store.postgres._texts_of), never for a
-- line with a \u escape (which jsonb may refuse); NULL stays NULL (no text, or purged).
-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and an index expression
-- plans its body again on every insert (about 250 us of server CPU an append); PL/pgSQL keeps
-- its plan for the session and returns a stored body without running a query.
CREATE FUNCTION tl_body(raw bytea, body text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $fn$
BEGIN
    IF body IS DISTINCT FROM '' THEN
        RETURN body;
    END IF;
    RETURN (SELECT left(string_agg(b.value -> 'text' ->> 'content', E'\n' ORDER BY b.n), 20000)
        FROM jsonb_array_elements(convert_from(raw, 'UTF8')::jsonb -> 'message' -> 'content')
            WITH ORDINALITY AS b(value, n)
        WHERE b.value -> 'text' ->> 'content' <> '');
END
$fn$;

DROP INDEX tl_records_tsv;
ALTER TABLE tl_records DROP COLUMN tsv;
-- the text blocks of a row's JSON, or NULL where jsonb cannot read it (for this migration only)
CREATE FUNCTION pg_temp.tl_texts(raw bytea) RETURNS text LANGUAGE plpgsql AS $fn$
BEGIN
    IF position('\x5c75'::bytea IN raw) <> 0 THEN
        RETURN NULL;  -- a \u escape: the store keeps such a body as it is
    END IF;
    RETURN tl_body(raw, '');
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$fn$;
-- one rewrite of every message row: etext as above (from the old body), and body '' where the
-- JSON's text blocks are it exactly
UPDATE tl_records SET
    etext = CASE WHEN etext IS NULL THEN '' WHEN etext = left(body, 1000) THEN NULL
        ELSE etext END,
    body = CASE WHEN pg_temp.tl_texts(raw) = body THEN '' ELSE body END
    WHERE body IS NOT NULL;
DROP FUNCTION pg_temp.tl_texts(bytea);
CREATE INDEX tl_records_text ON tl_records USING gin (to_tsvector('english', tl_body(raw, body)))
    WHERE body IS NOT NULL;
DROP INDEX tl_records_id;
CREATE INDEX tl_records_id ON tl_records (tenant_id, session_id, id) WHERE role IS NOT NULL;
