-- +goose Up

-- A tenant's secrets, one series per purpose, each key numbered so it can
-- be rotated: the newest key signs; a rotated key keeps verifying until
-- its expires_at (the grace period), so nothing signed just before a
-- rotation breaks.
--   token:     HS256 key of the tenant's end-user tokens (JWT kid).
--   state:     HMAC key that signs the state a client-managed agent
--              returns, so a client cannot forge the history it sends back.
--   event_ids: key that turns the global ids of interrupt events into
--              opaque ids per tenant (never rotated: ids must stay stable).
CREATE TABLE tenant_secrets (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    purpose    text NOT NULL CHECK (purpose IN ('token', 'state', 'event_ids')),
    key_id     integer NOT NULL CHECK (key_id > 0),
    secret     bytea NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    PRIMARY KEY (tenant_id, purpose, key_id)
);

-- Existing tenants keep their token secret as key 1 and get the others.
-- gen_random_uuid is a strong random source (no extension needed).
INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
SELECT id, 'token', 1, token_secret FROM tenants;
INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
SELECT t.id, p.purpose, 1, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || p.purpose, 'UTF8'))
FROM tenants t CROSS JOIN (VALUES ('state'), ('event_ids')) AS p (purpose);
ALTER TABLE tenants DROP COLUMN token_secret;

-- Every tenant, however it is created, gets its first keys with it. The
-- policies below admit rows of the transaction's tenant only; a tenant is
-- created by system work (or by an operator in SQL), so the trigger says
-- it is system work for its one insert and then restores the setting.
-- +goose StatementBegin
CREATE FUNCTION tenants_create_secrets() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER tenants_create_secrets AFTER INSERT ON tenants
    FOR EACH ROW EXECUTE FUNCTION tenants_create_secrets();

-- Revoked end-user tokens: one token by its id (jti) until it would have
-- expired anyway, or every token of an end user issued before a time.
CREATE TABLE revoked_user_tokens (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    token_id   text NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, token_id)
);
CREATE TABLE end_user_token_cutoffs (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    end_user   text NOT NULL,
    not_before timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, end_user)
);

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenant_secrets', 'revoked_user_tokens', 'end_user_token_cutoffs'] LOOP
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
GRANT SELECT, INSERT, UPDATE ON tenant_secrets, revoked_user_tokens, end_user_token_cutoffs TO holdpoint_app;

-- +goose Down
DROP TRIGGER tenants_create_secrets ON tenants;
DROP FUNCTION tenants_create_secrets();
DROP TABLE end_user_token_cutoffs;
DROP TABLE revoked_user_tokens;
ALTER TABLE tenants ADD COLUMN token_secret bytea NOT NULL
    DEFAULT sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));
UPDATE tenants t SET token_secret = s.secret
FROM tenant_secrets s
WHERE s.tenant_id = t.id AND s.purpose = 'token'
  AND s.key_id = (SELECT max(key_id) FROM tenant_secrets x WHERE x.tenant_id = t.id AND x.purpose = 'token');
DROP TABLE tenant_secrets;
