-- threadline PostgreSQL store, schema version 7: a shared session's appends in plain PL/pgSQL
-- statements. First, its append while no other writer is at work, as a function. Version 6 ran
-- it as one SQL statement (a CTE that set the tenant, read the session row FOR SHARE under the
-- session's tried lock and inserted); the executor built that plan's nodes again on every call
-- (bench/README.md, "Schema 7"). In PL/pgSQL the settings are assignments (no query) and each
-- statement is a small cached plan; each statement takes its snapshot when it starts, so the
-- session row is read after the lock was granted (no row lock needed: a fold committed before
-- the lock is seen).
--
-- tl_append_alone inserts the record numbered p_seq (the one after the last record the client
-- knows of, under its own leaf) when the session's lock is free (tried, held for this
-- transaction), the session row is as the client read it (p_generation) with its tail open,
-- and that number is not taken (another writer appended). It returns the session row's
-- next_seq, or NULL when it inserted nothing (the client then calls tl_append_at_leaf). When
-- the client passes the summary of the records p_fold_from to p_seq (all of them its own, the
-- open tail with this record) and next_seq is still p_fold_from, the same transaction folds
-- them into the session row and the function returns p_seq + 1, the new next_seq: a fold
-- without a round trip of its own.
-- SECURITY INVOKER (the default): the caller's row-level security applies.

CREATE FUNCTION tl_append_alone(
    p_tenant text, p_sync text, p_session text, p_key text, p_generation bigint, p_seq bigint,
    p_id text, p_parent text, p_type text, p_timestamp text, p_role text, p_body text,
    p_etext text, p_raw bytea, p_fold_from bigint, p_fold_modified text, p_fold_count integer,
    p_fold_name text, p_fold_first text)
    RETURNS bigint
    LANGUAGE plpgsql
    AS $fn$
#variable_conflict use_column
DECLARE
    nxt bigint;
    done text;
BEGIN
    -- assignments, not PERFORM: PL/pgSQL evaluates them without a query
    done := set_config('threadline.tenant', p_tenant, true);
    IF NOT pg_try_advisory_xact_lock(hashtextextended(p_key, 0)) THEN
        RETURN NULL;
    END IF;
    done := set_config('synchronous_commit', p_sync, true);
    SELECT s.next_seq INTO nxt FROM tl_sessions s
        WHERE s.tenant_id = p_tenant AND s.session_id = p_session
            AND s.generation = p_generation AND s.open_tail;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, timestamp, role,
            body, etext, raw)
        VALUES (p_tenant, p_session, p_seq, p_id, p_parent, p_type, p_timestamp, p_role,
            p_body, p_etext, p_raw)
        ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_fold_from = nxt THEN
        UPDATE tl_sessions s SET next_seq = p_seq + 1,
                modified = greatest(s.modified, p_fold_modified),
                message_count = s.message_count + p_fold_count,
                name = coalesce(p_fold_name, s.name),
                first_message = coalesce(s.first_message, p_fold_first)
            WHERE s.tenant_id = p_tenant AND s.session_id = p_session;
        RETURN p_seq + 1;
    END IF;
    RETURN nxt;
END
$fn$;

-- Second, tl_append_at_leaf (version 6) does what it did, in the same way: the session row, then
-- its last record, each read by a statement of its own (after the lock was granted), checked in
-- PL/pgSQL, and the record inserted with VALUES, instead of one statement joining them
-- (LATERAL, a materialized CTE and INSERT ... SELECT), whose plan the executor built on every
-- call. The returned rows, the fold and the errors are version 6's.

CREATE OR REPLACE FUNCTION tl_append_at_leaf(
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
    last_id text;
    last_type text;
    parent text := p_parent;
    line bytea := p_raw;
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
    -- the session as the client read it (generation), and its last record: the leaf when it
    -- is the client's, or a known tree entry another writer appended; the new record then
    -- goes under it, its parent written into the JSON where the client's stood
    SELECT s.next_seq, s.open_tail INTO nxt, tail_open FROM tl_sessions s
        WHERE s.tenant_id = p_tenant AND s.session_id = p_session
            AND s.generation = p_generation;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT r.seq, r.id, r.type INTO last_seq, last_id, last_type FROM tl_records r
        WHERE r.tenant_id = p_tenant AND r.session_id = p_session
        ORDER BY r.seq DESC LIMIT 1;
    last_seq := coalesce(last_seq, 0);
    IF last_seq < p_seen OR (last_seq > p_seen AND (last_type = ANY (p_tree)) IS NOT TRUE) THEN
        RETURN;
    END IF;
    IF last_seq > p_seen THEN
        parent := last_id;
        line := overlay(p_raw PLACING convert_to(to_json(last_id)::text, 'UTF8')
            FROM p_at FOR p_len);
    END IF;
    INSERT INTO tl_records (tenant_id, session_id, seq, id, parent_id, type, timestamp, role,
            body, etext, raw)
        VALUES (p_tenant, p_session, last_seq + 1, p_id, parent, p_type, p_timestamp, p_role,
            p_body, p_etext, line);
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
