-- threadline PostgreSQL store, schema version 1.
-- Every table carries tenant_id first in every primary, unique and foreign key; rows are kept
-- apart by FORCEd row-level security on current_setting('threadline.tenant', true), which the
-- store sets per transaction with set_config(..., true). The application role threadline_app is
-- neither the owner of these tables nor BYPASSRLS. Sessions are independent: the tables
-- distribute by session_id (docs/stores.md shows the Citus calls).

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'threadline_app') THEN
        CREATE ROLE threadline_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;

CREATE TABLE tl_sessions (
    tenant_id      text NOT NULL,
    session_id     text NOT NULL,
    header         bytea NOT NULL,
    created        text NOT NULL,
    modified       text NOT NULL,
    name           text,
    message_count  integer NOT NULL DEFAULT 0,
    first_message  text,
    parent_session text,
    generation     integer NOT NULL DEFAULT 0,
    next_seq       bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX tl_sessions_modified ON tl_sessions (tenant_id, modified DESC);

CREATE TABLE tl_records (
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    id         text,
    parent_id  text,
    type       text NOT NULL,
    timestamp  text,
    raw        bytea NOT NULL,
    role       text,                        -- message records: the role
    body       text,                        -- message records: the searchable text
    etext      text,                        -- message records: the text blocks, embedded
    tsv        tsvector GENERATED ALWAYS AS (to_tsvector('english', coalesce(body, ''))) STORED,
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id) REFERENCES tl_sessions (tenant_id, session_id)
        ON DELETE CASCADE
);
CREATE INDEX tl_records_id ON tl_records (tenant_id, session_id, id);
CREATE INDEX tl_records_tsv ON tl_records USING gin (tsv) WHERE body IS NOT NULL;

CREATE TABLE tl_vectors (
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    model      text NOT NULL,
    vec        bytea NOT NULL,              -- float32, L2-normalised
    PRIMARY KEY (tenant_id, session_id, seq),
    FOREIGN KEY (tenant_id, session_id, seq) REFERENCES tl_records (tenant_id, session_id, seq)
        ON DELETE CASCADE
);

CREATE TABLE tl_session_tags (
    tenant_id  text NOT NULL,
    session_id text NOT NULL,
    tag        text NOT NULL,
    PRIMARY KEY (tenant_id, session_id, tag),
    FOREIGN KEY (tenant_id, session_id) REFERENCES tl_sessions (tenant_id, session_id)
        ON DELETE CASCADE
);
CREATE INDEX tl_session_tags_tag ON tl_session_tags (tenant_id, tag);

CREATE TABLE tl_tag_tokens (
    tenant_id   text NOT NULL,
    token       text NOT NULL,
    operation   text NOT NULL,
    args        text NOT NULL,
    session_ids text NOT NULL,
    created     text NOT NULL,
    PRIMARY KEY (tenant_id, token)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tl_sessions', 'tl_records', 'tl_vectors', 'tl_session_tags',
                             'tl_tag_tokens']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I FOR ALL '
                       'USING (tenant_id = current_setting(''threadline.tenant'', true)) '
                       'WITH CHECK (tenant_id = current_setting(''threadline.tenant'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO threadline_app', t);
    END LOOP;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO threadline_app', current_schema());
END
$$;
