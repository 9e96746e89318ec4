-- +goose Up

-- Work that spans tenants (creating and listing tenants, looking up an API
-- key by its hash, taking over detached turns, the deadline sweeper, the
-- live-event reader) used to say so by setting holdpoint.system = 'on',
-- which the policies honoured. Any role can set a setting, so the
-- application role could grant itself every tenant's rows. Now that work
-- goes through the narrow SECURITY DEFINER functions below, each doing one
-- named thing; they run as the tables' owner (the role that migrates),
-- and the policies let the owner through. The application role may call
-- these functions and cannot become the owner, so it has no way to see
-- across tenants but what the functions do. (The owner could always turn
-- its own tables' policies off; letting it through them adds nothing.)
-- +goose StatementBegin
CREATE FUNCTION holdpoint_system_actor() RETURNS boolean
LANGUAGE sql STABLE SET search_path = public, pg_temp AS $$
    SELECT current_user = (SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE c.oid = 'tenants'::regclass);
$$;
-- +goose StatementEnd

-- The policies: the transaction's tenant, or the system functions.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'snapshots', 'messages', 'interrupts', 'interrupt_events',
                             'api_keys', 'turn_jobs', 'tool_calls', 'tenant_secrets',
                             'revoked_user_tokens', 'end_user_token_cutoffs'] LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP POLICY tenant_isolation ON tenants;
CREATE POLICY tenant_isolation ON tenants
    USING (id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (holdpoint_system_actor());

-- +goose StatementBegin
CREATE FUNCTION holdpoint_create_tenant(p_id text, p_name text) RETURNS SETOF tenants
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    INSERT INTO tenants (id, name) VALUES (p_id, p_name) RETURNING *;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION holdpoint_list_tenants() RETURNS SETOF tenants
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM tenants ORDER BY created_at, id;
$$;
-- +goose StatementEnd

-- Authentication: the key decides the tenant. Stamps the key's use, at
-- most once a minute.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_api_key_by_hash(p_hash bytea) RETURNS SETOF api_keys
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE api_keys SET last_used_at = now()
    WHERE key_hash = p_hash AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');
    RETURN QUERY SELECT * FROM api_keys WHERE key_hash = p_hash;
END;
$$;
-- +goose StatementEnd

-- Takes the oldest detached turn nobody owns, or whose owner stopped
-- heartbeating. SKIP LOCKED lets every instance's worker poll at once
-- without two of them taking the same job.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_claim_next_turn_job(p_owner text, p_agents text[], p_stale_seconds float8) RETURNS SETOF turn_jobs
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    UPDATE turn_jobs
    SET owner = p_owner, heartbeat_at = now(), attempts = attempts + 1
    WHERE (tenant_id, snapshot_id) = (
        SELECT j.tenant_id, j.snapshot_id FROM turn_jobs j
        WHERE (j.owner IS NULL OR j.heartbeat_at < now() - make_interval(secs => p_stale_seconds))
          AND j.agent = ANY(p_agents)
        ORDER BY j.heartbeat_at
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING *;
$$;
-- +goose StatementEnd

-- Shutdown: hand an instance's jobs back so another takes them at once.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_release_turn_jobs(p_owner text) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH released AS (UPDATE turn_jobs SET owner = NULL WHERE owner = p_owner RETURNING 1)
    SELECT count(*) FROM released;
$$;
-- +goose StatementEnd

-- The deadline sweeper's batch: due interrupts of every tenant, locked for
-- the caller's transaction (SKIP LOCKED: instances sweep at once without
-- applying a deadline twice). The sweeper changes each under its own
-- tenant.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_lock_due_interrupts(p_batch integer) RETURNS SETOF interrupts
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM interrupts
    WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now()
    ORDER BY expires_at
    LIMIT p_batch
    FOR UPDATE SKIP LOCKED;
$$;
-- +goose StatementEnd

-- The live-event reader: the events of every tenant since a time.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_recent_interrupt_events(p_since timestamptz) RETURNS SETOF interrupt_events
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT * FROM interrupt_events
    WHERE created_at >= p_since
    ORDER BY created_at, id
    LIMIT 10000;
$$;
-- +goose StatementEnd

-- A tenant's first keys come with it, however it is created.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tenants_create_secrets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
    SELECT NEW.id, p.purpose, 1, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || p.purpose, 'UTF8'))
    FROM (VALUES ('token'), ('state'), ('event_ids')) AS p (purpose);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Only the application role may call them (never PUBLIC).
-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['holdpoint_create_tenant(text, text)', 'holdpoint_list_tenants()',
                             'holdpoint_api_key_by_hash(bytea)', 'holdpoint_claim_next_turn_job(text, text[], float8)',
                             'holdpoint_release_turn_jobs(text)', 'holdpoint_lock_due_interrupts(integer)',
                             'holdpoint_recent_interrupt_events(timestamptz)'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO holdpoint_app', f);
    END LOOP;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION tenants_create_secrets() FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tenants_create_secrets() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was text := current_setting('holdpoint.system', true);
BEGIN
    PERFORM set_config('holdpoint.system', 'on', true);
    INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
    SELECT NEW.id, p.purpose, 1, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || p.purpose, 'UTF8'))
    FROM (VALUES ('token'), ('state'), ('event_ids')) AS p (purpose);
    PERFORM set_config('holdpoint.system', coalesce(was, ''), true);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
GRANT EXECUTE ON FUNCTION tenants_create_secrets() TO PUBLIC;
DROP FUNCTION holdpoint_recent_interrupt_events(timestamptz);
DROP FUNCTION holdpoint_lock_due_interrupts(integer);
DROP FUNCTION holdpoint_release_turn_jobs(text);
DROP FUNCTION holdpoint_claim_next_turn_job(text, text[], float8);
DROP FUNCTION holdpoint_api_key_by_hash(bytea);
DROP FUNCTION holdpoint_list_tenants();
DROP FUNCTION holdpoint_create_tenant(text, text);
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'snapshots', 'messages', 'interrupts', 'interrupt_events',
                             'api_keys', 'turn_jobs', 'tool_calls', 'tenant_secrets',
                             'revoked_user_tokens', 'end_user_token_cutoffs'] LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
                   OR current_setting('holdpoint.system', true) = 'on')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP POLICY tenant_isolation ON tenants;
CREATE POLICY tenant_isolation ON tenants
    USING (id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (current_setting('holdpoint.system', true) = 'on');
DROP FUNCTION holdpoint_system_actor();
