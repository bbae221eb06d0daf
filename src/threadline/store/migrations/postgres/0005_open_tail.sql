-- threadline PostgreSQL store, schema version 5: a writer's appends leave the session row alone.
-- A writer holds its session's advisory lock for its whole life, so it numbers its records
-- itself and an append is a plain INSERT into tl_records. The session row's list columns
-- (modified, message_count, name, first_message) are folded in lazily: next_seq now means
-- "records below it are folded in", and the writer folds the rest every few records, every
-- second or so, and when it releases the lock. open_tail marks a session whose records from
-- next_seq on may not be folded in yet (set by the writer's second append, cleared by the fold
-- at release); the listing summarizes those records when it reads such a row, so it stays
-- exact while a writer is open and after a writer was killed. No index covers the column: the
-- session row's updates stay HOT (schema version 3). Every existing session is folded in
-- (next_seq was bumped by every append), so false is right for all of them; a constant default
-- adds the column without rewriting the table.

ALTER TABLE tl_sessions ADD COLUMN open_tail boolean NOT NULL DEFAULT false;
