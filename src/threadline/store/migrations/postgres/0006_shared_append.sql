-- threadline PostgreSQL store, schema version 6: the append of a shared session in one statement.
-- A session opened shared=True holds no writer lock between appends. Each append calls
-- tl_append_at_leaf, one statement and one round trip. It takes the session's advisory lock for
-- its own transaction (queued in the server up to lock_timeout, after a try); each statement of
-- the function then takes its snapshot after the lock was granted, so it sees every record
-- appended before. The new record is numbered after the last of them and, when other writers
-- appended since the client last knew the session (p_seen), placed under the last record (the
-- session's leaf then): its parent id is written into the JSON where the client's stood (p_at,
-- p_len: its position and length in p_raw). The function returns a row for the new record (its
-- number and parent); the client reads the others' records when it next reads the session. It
-- returns no row and writes nothing when the session is gone, was rewritten since the client
-- read it (p_generation), or when its last record is not the leaf (a leaf move, a meta record, a
-- type the client does not know as a tree entry: p_tree); the client then takes the writer lock.
-- A writer that had to wait commits with synchronous_commit off: the lock goes to the next
-- writer at once, and the client waits for the WAL flush in a statement of its own (which
-- threadline.flush, set here for the session, tells to wait; it may be sent in the same
-- pipeline, before the client knows whether it waited).
--
-- The session row's list columns are folded in lazily, as a writer holding the lock does (schema
-- version 5): the records from next_seq on are an open tail the listing summarizes. Summaries
-- are computed by the client (from the records' JSON): the append that makes the tail
-- p_fold_records records long (or a multiple of it, if that writer never folded) also returns
-- the tail's records, and the client passes their summary with its next call, or in a fold of
-- its own when it closes the session (p_fold_*: the records p_fold_from to p_fold_to). A fold
-- applies only if next_seq is still p_fold_from, under the lock: it is counted once.
-- SECURITY INVOKER (the default): the caller's row-level security applies.

CREATE FUNCTION tl_append_at_leaf(
    p_tenant text, p_session text, p_key text, p_wait text, p_sync text, p_seen bigint,
    p_generation bigint, p_parent text, p_tree text[], p_id text, p_type text,
    p_timestamp text, p_role text, p_body text, p_etext text, p_raw bytea, p_at integer,
    p_len integer, p_fold_records integer, p_fold_from bigint, p_fold_to bigint,
    p_fold_modified text, p_fold_count integer, p_fold_name text, p_fold_first text)
    RETURNS TABLE (seq bigint, parent_id text, raw bytea, mine boolean, waited boolean,
        fold_from bigint)
    LANGUAGE plpgsql
    AS $fn$
#variable_conflict use_column
DECLARE
    lock_key bigint := hashtextextended(p_key, 0);
    w boolean := false;
    nxt bigint;
    tail_open boolean;
    last_seq bigint;
    parent text;
    due bigint;
    done text;
BEGIN
    -- assignments, not PERFORM: PL/pgSQL evaluates them without a query (a tenth of the cost)
    done := set_config('threadline.tenant', p_tenant, true);
    done := set_config('lock_timeout', p_wait, true);
    IF pg_try_advisory_xact_lock(lock_key) THEN
        done := set_config('synchronous_commit', p_sync, true);
    ELSE
        w := true;
        done := pg_advisory_xact_lock(lock_key)::text;
        done := set_config('synchronous_commit', 'off', true);
        -- for the client's flush barrier, which may be in the same pipeline
        done := set_config('threadline.flush', CASE WHEN p_sync = 'on' THEN 'on' ELSE '' END,
            false);
    END IF;
    -- one statement: the session row and its last record, and the record inserted after it
    -- when the session is as the client read it (generation) and the last record is the
    -- leaf (the client's, or a known tree entry another writer appended); its parent and JSON
    -- then name that record. No row: nothing was inserted.
    WITH l AS MATERIALIZED (
        SELECT s.generation, s.next_seq, s.open_tail, coalesce(r.seq, 0) AS last_seq, r.id,
            coalesce(r.seq, 0) > p_seen AS moved
        FROM tl_sessions s LEFT JOIN LATERAL (SELECT r.seq, r.id, r.type FROM tl_records r
            WHERE r.tenant_id = s.tenant_id AND r.session_id = s.session_id
            ORDER BY r.seq DESC LIMIT 1) r ON true
        WHERE s.tenant_id = p_tenant AND s.session_id = p_session AND s.generation = p_generation
            AND coalesce(r.seq, 0) >= p_seen
            AND (coalesce(r.seq, 0) = p_seen OR r.type = ANY (p_tree))
    ), i AS (
        INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, timestamp,
                role, body, etext, raw)
            SELECT p_tenant, p_session, l.last_seq + 1, p_id,
                CASE WHEN l.moved THEN l.id ELSE p_parent END, p_type, p_timestamp, p_role,
                p_body, p_etext, CASE WHEN l.moved THEN overlay(p_raw PLACING
                    convert_to(to_json(l.id)::text, 'UTF8') FROM p_at FOR p_len) ELSE p_raw END
            FROM l
            RETURNING parent_id
    )
    SELECT l.next_seq, l.open_tail, l.last_seq, i.parent_id
        INTO nxt, tail_open, last_seq, parent
        FROM l, i;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- the new record is in the open tail: the carried fold, or the flag alone
    IF p_fold_from IS NOT NULL AND p_fold_from = nxt AND p_fold_to <= last_seq THEN
        UPDATE tl_sessions s SET next_seq = p_fold_to + 1,
                modified = greatest(s.modified, p_fold_modified),
                message_count = s.message_count + p_fold_count,
                name = coalesce(p_fold_name, s.name),
                first_message = coalesce(s.first_message, p_fold_first), open_tail = true
            WHERE s.tenant_id = p_tenant AND s.session_id = p_session;
        nxt := p_fold_to + 1;
    ELSIF NOT tail_open THEN
        UPDATE tl_sessions s SET open_tail = true
            WHERE s.tenant_id = p_tenant AND s.session_id = p_session;
    END IF;
    -- one writer is told, the one whose record is the p_fold_records-th of the tail (and, if
    -- it never folds, the one at each further multiple): it gets the tail's records
    IF (last_seq + 2 - nxt) % p_fold_records = 0 THEN
        due := nxt;
        RETURN QUERY SELECT r.seq, NULL::text, r.raw, false, w, NULL::bigint
            FROM tl_records r
            WHERE r.tenant_id = p_tenant AND r.session_id = p_session AND r.seq >= nxt
                AND r.seq <= last_seq
            ORDER BY r.seq;
    END IF;
    seq := last_seq + 1;
    parent_id := parent;
    raw := NULL;
    mine := true;
    waited := w;
    fold_from := due;
    RETURN NEXT;
END
$fn$;
