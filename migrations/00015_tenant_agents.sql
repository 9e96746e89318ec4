-- +goose Up

-- Agents a tenant defines through the API: one row per agent name, and one
-- immutable row per version of its definition (the file as uploaded, and
-- its parsed form). PUT makes a new version current; DELETE disables the
-- agent (new turns are refused, its sessions stay readable).
CREATE TABLE tenant_agents (
    tenant_id       text NOT NULL REFERENCES tenants (id),
    name            text NOT NULL CHECK (name ~ '^[A-Za-z][A-Za-z0-9_-]{0,63}$'),
    current_version integer NOT NULL CHECK (current_version > 0),
    disabled_at     timestamptz,
    disabled_by     text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE tenant_agent_versions (
    tenant_id  text NOT NULL,
    name       text NOT NULL,
    version    integer NOT NULL CHECK (version > 0),
    source     text NOT NULL,
    definition jsonb NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name, version),
    FOREIGN KEY (tenant_id, name) REFERENCES tenant_agents (tenant_id, name) DEFERRABLE INITIALLY DEFERRED
);

-- The version of its agent each turn ran with (NULL: an agent compiled
-- into the binary).
ALTER TABLE snapshots ADD COLUMN agent_version integer;

-- Hosts (names or CIDRs) the operator lets a tenant's HTTP tools call
-- although they resolve to non-public addresses.
ALTER TABLE tenants ADD COLUMN tool_hosts text[] NOT NULL DEFAULT '{}';

-- The key that signs a tenant's HTTP tool calls (Standard Webhooks).
ALTER TABLE tenant_secrets DROP CONSTRAINT tenant_secrets_purpose_check;
ALTER TABLE tenant_secrets ADD CONSTRAINT tenant_secrets_purpose_check
    CHECK (purpose IN ('token', 'state', 'event_ids', 'tool'));
INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
SELECT id, 'tool', 1, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || 'tool', 'UTF8'))
FROM tenants;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION tenants_create_secrets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
    SELECT NEW.id, p.purpose, 1, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || p.purpose, 'UTF8'))
    FROM (VALUES ('token'), ('state'), ('event_ids'), ('tool')) AS p (purpose);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- An HTTP tool call's last response status and attempts.
ALTER TABLE tool_calls ADD COLUMN http_status integer;
ALTER TABLE tool_calls ADD COLUMN attempts integer;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenant_agents', 'tenant_agent_versions'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I
            USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
            WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd
GRANT SELECT, INSERT, UPDATE ON tenant_agents TO holdpoint_app;
-- Versions are a record: added, never changed.
GRANT SELECT, INSERT ON tenant_agent_versions TO holdpoint_app;

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN attempts;
ALTER TABLE tool_calls DROP COLUMN http_status;
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
DELETE FROM tenant_secrets WHERE purpose = 'tool';
ALTER TABLE tenant_secrets DROP CONSTRAINT tenant_secrets_purpose_check;
ALTER TABLE tenant_secrets ADD CONSTRAINT tenant_secrets_purpose_check
    CHECK (purpose IN ('token', 'state', 'event_ids'));
ALTER TABLE tenants DROP COLUMN tool_hosts;
ALTER TABLE snapshots DROP COLUMN agent_version;
DROP TABLE tenant_agent_versions;
DROP TABLE tenant_agents;
