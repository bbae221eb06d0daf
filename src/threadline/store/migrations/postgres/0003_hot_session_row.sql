-- threadline PostgreSQL store, schema version 3: the session row's per-append update is HOT.
-- Every append updates its session's row (next_seq and the list columns: modified,
-- message_count, name, first_message) in the statement that inserts the records. An index on
-- any of those columns makes every such update a non-HOT one: a new row version with an entry
-- in every index of the table (the primary key too) and a dead one to vacuum, ~30 us of server
-- CPU per append (bench/README.md). Without it the update stays on its heap page (HOT). The
-- listing sorts a tenant's sessions by modified after reading them through the primary key
-- (tenant_id, session_id), which it reads in full anyway.

DROP INDEX IF EXISTS tl_sessions_modified;
