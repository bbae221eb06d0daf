-- threadline PostgreSQL store, schema version 2: tenant login roles (docs/stores.md, "Tenancy").
-- The setting-based policy (tenant_isolation) trusts the application: any connection can set
-- threadline.tenant. This adds a second mode where each tenant logs in as a role of its own,
-- a member of the group threadline_tenant, whose rows are chosen by that role alone: the
-- setting is ignored for members of threadline_tenant, and tl_role_tenant() maps a role to
-- its tenant from tl_tenant_roles, which only the owner can change.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'threadline_tenant') THEN
        CREATE ROLE threadline_tenant NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;

CREATE TABLE tl_tenant_roles (
    role_name  text PRIMARY KEY,
    tenant_id  text NOT NULL
);
REVOKE ALL ON tl_tenant_roles FROM PUBLIC;

CREATE FUNCTION tl_role_tenant(role_name name) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
    AS $fn$ SELECT tenant_id FROM tl_tenant_roles WHERE role_name = $1::text $fn$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tl_sessions', 'tl_records', 'tl_vectors', 'tl_session_tags',
                             'tl_tag_tokens']
    LOOP
        EXECUTE format('ALTER POLICY tenant_isolation ON %I '
                       'USING (tenant_id = current_setting(''threadline.tenant'', true) '
                       'AND NOT pg_has_role(current_user, ''threadline_tenant'', ''MEMBER'')) '
                       'WITH CHECK (tenant_id = current_setting(''threadline.tenant'', true) '
                       'AND NOT pg_has_role(current_user, ''threadline_tenant'', ''MEMBER''))', t);
        EXECUTE format('CREATE POLICY tenant_role ON %I FOR ALL TO threadline_tenant '
                       'USING (tenant_id = tl_role_tenant(current_user)) '
                       'WITH CHECK (tenant_id = tl_role_tenant(current_user))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO threadline_tenant', t);
    END LOOP;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO threadline_tenant', current_schema());
END
$$;
