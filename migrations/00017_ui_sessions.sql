-- +goose Up

-- Dashboard sessions: an operator signs in with an admin API key once and
-- gets an opaque token in a cookie; only its hash is stored. A session
-- ends at expires_at, when revoked (sign-out), or when its key is revoked.
CREATE TABLE ui_sessions (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    tenant_id  text NOT NULL REFERENCES tenants (id),
    key_id     uuid NOT NULL,
    actor      text NOT NULL,
    csrf       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    FOREIGN KEY (tenant_id, key_id) REFERENCES api_keys (tenant_id, id)
);
ALTER TABLE ui_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE ui_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ui_sessions
    USING (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor())
    WITH CHECK (tenant_id = current_setting('holdpoint.tenant_id', true) OR holdpoint_system_actor());
GRANT SELECT, INSERT, UPDATE ON ui_sessions TO holdpoint_app;

-- The cookie decides the tenant, so its lookup is a system function: a
-- live session whose key is not revoked.
-- +goose StatementBegin
CREATE FUNCTION holdpoint_ui_session_by_hash(p_hash bytea) RETURNS SETOF ui_sessions
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT s.* FROM ui_sessions s
    JOIN api_keys k ON k.tenant_id = s.tenant_id AND k.id = s.key_id
    WHERE s.token_hash = p_hash AND s.revoked_at IS NULL AND s.expires_at > now() AND k.revoked_at IS NULL;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION holdpoint_ui_session_by_hash(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION holdpoint_ui_session_by_hash(bytea) TO holdpoint_app;

-- +goose Down
DROP FUNCTION holdpoint_ui_session_by_hash(bytea);
DROP TABLE ui_sessions;
