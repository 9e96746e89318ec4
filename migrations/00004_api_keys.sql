-- +goose Up

-- Each tenant signs its end users' tokens with its own secret, so rotating
-- one tenant's secret revokes only that tenant's tokens. The default draws
-- on gen_random_uuid (a strong random source) so no extension is needed.
ALTER TABLE tenants ADD COLUMN token_secret bytea NOT NULL
    DEFAULT sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));

-- API keys: only a SHA-256 hash of the key is stored. Keys are looked up
-- by hash before the tenant is known, hence the unique index on hash alone
-- (a system lookup).
CREATE TABLE api_keys (
    tenant_id    text NOT NULL REFERENCES tenants (id),
    id           uuid NOT NULL,
    name         text NOT NULL DEFAULT '',
    role         text NOT NULL CHECK (role IN ('client', 'admin')),
    key_hash     bytea NOT NULL,
    key_prefix   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    last_used_at timestamptz,
    PRIMARY KEY (tenant_id, id)
);

CREATE UNIQUE INDEX api_keys_hash_idx ON api_keys (key_hash);

GRANT SELECT, INSERT, UPDATE ON api_keys TO holdpoint_app;
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON api_keys
    USING (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on')
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true)
           OR current_setting('holdpoint.system', true) = 'on');

-- +goose Down
DROP TABLE api_keys;
ALTER TABLE tenants DROP COLUMN token_secret;
