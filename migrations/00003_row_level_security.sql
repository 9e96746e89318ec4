-- +goose Up

-- The server's queries run as holdpoint_app (SET ROLE after connecting):
-- not the owner of any table and without BYPASSRLS, so the policies below
-- apply to it. Roles are cluster-wide, hence the existence check.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'holdpoint_app') THEN
        CREATE ROLE holdpoint_app NOLOGIN NOBYPASSRLS;
    END IF;
END
$$;
-- +goose StatementEnd

GRANT USAGE ON SCHEMA public TO holdpoint_app;
GRANT SELECT, INSERT, UPDATE ON tenants, sessions, snapshots, messages, interrupts TO holdpoint_app;
GRANT DELETE ON sessions, snapshots, messages, interrupts TO holdpoint_app;
-- The audit trail is append-only for the server.
GRANT SELECT, INSERT ON interrupt_events TO holdpoint_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO holdpoint_app;
GRANT SELECT ON goose_db_version TO holdpoint_app;

-- Views check the policies as the querying role, not as their owner.
ALTER VIEW interrupt_facts SET (security_invoker = true);
ALTER VIEW interrupt_daily SET (security_invoker = true);
GRANT SELECT ON interrupt_facts, interrupt_daily TO holdpoint_app;

-- Every tenant table is visible only under the tenant of the transaction
-- (SET LOCAL through set_config(..., true)). A query that forgets to set it
-- sees nothing. Workers that span tenants (the deadline sweeper, key
-- lookup) say so explicitly with holdpoint.system.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'snapshots', 'messages', 'interrupts', 'interrupt_events'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
    USING (id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (current_setting('holdpoint.system', true) = 'on');

-- +goose Down
DROP POLICY tenant_isolation ON tenants;
ALTER TABLE tenants NO FORCE ROW LEVEL SECURITY;
ALTER TABLE tenants DISABLE ROW LEVEL SECURITY;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'snapshots', 'messages', 'interrupts', 'interrupt_events'] LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER VIEW interrupt_daily RESET (security_invoker);
ALTER VIEW interrupt_facts RESET (security_invoker);
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM holdpoint_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM holdpoint_app;
REVOKE USAGE ON SCHEMA public FROM holdpoint_app;
