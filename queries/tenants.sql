-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: ListTenants :many
-- A system function (holdpoint_system).
SELECT * FROM holdpoint_list_tenants();

-- name: InsertTenant :one
-- A system function (holdpoint_system); the tenant's first keys come with
-- it (trigger tenants_create_secrets).
SELECT * FROM holdpoint_create_tenant(@id, @name);

-- name: ListTenantSecrets :many
-- The keys of one purpose that still verify, newest (the signing key)
-- first.
SELECT key_id, secret, expires_at FROM tenant_secrets
WHERE tenant_id = @tenant_id AND purpose = @purpose AND (expires_at IS NULL OR expires_at > now())
ORDER BY key_id DESC;

-- name: RotateTenantSecret :one
-- Adds the next key of a purpose (the new signing key) and gives the keys
-- that were current until the end of the grace period to keep verifying;
-- the trigger tenant_secrets_cap (migration 00033) expires at once all but
-- the three newest.
WITH retired AS (
    UPDATE tenant_secrets SET expires_at = now() + make_interval(secs => @grace_seconds::float8)
    WHERE tenant_id = @tenant_id AND purpose = @purpose AND expires_at IS NULL
    RETURNING key_id
)
INSERT INTO tenant_secrets (tenant_id, purpose, key_id, secret)
SELECT @tenant_id, @purpose,
       1 + coalesce((SELECT max(key_id) FROM tenant_secrets WHERE tenant_id = @tenant_id AND purpose = @purpose), 0),
       @secret
RETURNING key_id;

-- name: GetTokenVerification :one
-- What verifying an end-user token needs, in one round trip: the token
-- keys that still verify (newest first), whether this token was revoked,
-- and the time before which the user's tokens were all revoked.
SELECT
    coalesce((SELECT array_agg(k.key_id ORDER BY k.key_id DESC) FROM tenant_secrets k
              WHERE k.tenant_id = @tenant_id AND k.purpose = 'token' AND (k.expires_at IS NULL OR k.expires_at > now())), '{}')::integer[] AS key_ids,
    coalesce((SELECT array_agg(k.secret ORDER BY k.key_id DESC) FROM tenant_secrets k
              WHERE k.tenant_id = @tenant_id AND k.purpose = 'token' AND (k.expires_at IS NULL OR k.expires_at > now())), '{}')::bytea[] AS secrets,
    EXISTS (SELECT 1 FROM revoked_user_tokens r WHERE r.tenant_id = @tenant_id AND r.token_id = @token_id) AS token_revoked,
    coalesce((SELECT c.not_before FROM end_user_token_cutoffs c WHERE c.tenant_id = @tenant_id AND c.end_user = @end_user),
             'epoch'::timestamptz)::timestamptz AS not_before;

-- name: RevokeUserToken :exec
INSERT INTO revoked_user_tokens (tenant_id, token_id, expires_at)
VALUES (@tenant_id, @token_id, @expires_at)
ON CONFLICT (tenant_id, token_id) DO NOTHING;

-- name: RevokeEndUserTokens :exec
-- Tokens are stamped in whole seconds: every token of the user issued up
-- to the end of this second is refused (one minted in the same second
-- after the revocation too; the client mints again).
INSERT INTO end_user_token_cutoffs (tenant_id, end_user, not_before)
VALUES (@tenant_id, @end_user, date_trunc('second', now()) + interval '1 second')
ON CONFLICT (tenant_id, end_user) DO UPDATE SET not_before = EXCLUDED.not_before;

-- name: InsertAPIKey :exec
INSERT INTO api_keys (tenant_id, id, name, role, key_hash, key_prefix, scopes)
VALUES (@tenant_id, @id, @name, @role, @key_hash, @key_prefix, @scopes::text[]);

-- name: GetAPIKeyByHash :one
-- Authentication: the tenant is not known yet. A system function
-- (holdpoint_system), which also stamps the key's use.
SELECT * FROM holdpoint_api_key_by_hash(@key_hash);

-- name: ListAPIKeys :many
SELECT * FROM api_keys WHERE tenant_id = @tenant_id ORDER BY created_at, id;

-- name: RevokeAPIKey :execrows
UPDATE api_keys SET revoked_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND revoked_at IS NULL;

-- name: SetTenant :exec
-- Scopes the transaction to one tenant for the row-level security policies,
-- as the application role. Both settings end with the transaction, so they
-- hold behind a transaction pooler (PgBouncer's pool_mode=transaction), whose
-- next transaction may run on another server connection, and never leak to
-- the pooler's next client of this one.
SELECT set_config('role', 'holdpoint_app', true), set_config('holdpoint.tenant_id', @tenant_id::text, true);

-- name: SetAppRole :exec
-- Every server connection drops to the application role, which owns no
-- table and cannot bypass row-level security. Session-level: not sent
-- behind a transaction pooler, where SetTenant sets the role per
-- transaction instead.
SET ROLE holdpoint_app;
