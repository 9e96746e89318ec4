-- +goose Up

-- A series of signing secrets keeps at most three live: the newest (which
-- signs from now on) and the two before it, in their grace period. Every
-- live secret signs every request (webhooks) or tool call, so without a
-- cap rotating often piled them up: one endpoint rotated 300 times sent
-- 301 signatures in a header. Adding a secret past the cap expires the
-- oldest live ones at once, so a receiver that has not switched in two
-- rotations stops verifying. The rule is a trigger, so it holds for every
-- way a secret is added (a rotation, an operator's SQL).

-- +goose StatementBegin
CREATE FUNCTION webhook_secrets_cap() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE webhook_secrets s SET expires_at = now()
    WHERE s.tenant_id = NEW.tenant_id AND s.webhook_id = NEW.webhook_id
      AND (s.expires_at IS NULL OR s.expires_at > now())
      AND s.key_id < (SELECT min(k.key_id) FROM (
              SELECT key_id FROM webhook_secrets
              WHERE tenant_id = NEW.tenant_id AND webhook_id = NEW.webhook_id
                AND (expires_at IS NULL OR expires_at > now())
              ORDER BY key_id DESC LIMIT 3) k);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER webhook_secrets_cap AFTER INSERT ON webhook_secrets
    FOR EACH ROW EXECUTE FUNCTION webhook_secrets_cap();

-- The same for a tenant's keys, per purpose (token, state, tool; the
-- event_ids key is never rotated).
-- +goose StatementBegin
CREATE FUNCTION tenant_secrets_cap() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE tenant_secrets s SET expires_at = now()
    WHERE s.tenant_id = NEW.tenant_id AND s.purpose = NEW.purpose
      AND (s.expires_at IS NULL OR s.expires_at > now())
      AND s.key_id < (SELECT min(k.key_id) FROM (
              SELECT key_id FROM tenant_secrets
              WHERE tenant_id = NEW.tenant_id AND purpose = NEW.purpose
                AND (expires_at IS NULL OR expires_at > now())
              ORDER BY key_id DESC LIMIT 3) k);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER tenant_secrets_cap AFTER INSERT ON tenant_secrets
    FOR EACH ROW EXECUTE FUNCTION tenant_secrets_cap();

-- The piles rotations already made are cut to the cap now.
UPDATE webhook_secrets s SET expires_at = now()
FROM (SELECT tenant_id, webhook_id, key_id,
             row_number() OVER (PARTITION BY tenant_id, webhook_id ORDER BY key_id DESC) AS n
      FROM webhook_secrets WHERE expires_at IS NULL OR expires_at > now()) r
WHERE r.tenant_id = s.tenant_id AND r.webhook_id = s.webhook_id AND r.key_id = s.key_id AND r.n > 3;
UPDATE tenant_secrets s SET expires_at = now()
FROM (SELECT tenant_id, purpose, key_id,
             row_number() OVER (PARTITION BY tenant_id, purpose ORDER BY key_id DESC) AS n
      FROM tenant_secrets WHERE expires_at IS NULL OR expires_at > now()) r
WHERE r.tenant_id = s.tenant_id AND r.purpose = s.purpose AND r.key_id = s.key_id AND r.n > 3;

-- +goose Down
-- Secrets the cap expired stay expired.
DROP TRIGGER tenant_secrets_cap ON tenant_secrets;
DROP FUNCTION tenant_secrets_cap();
DROP TRIGGER webhook_secrets_cap ON webhook_secrets;
DROP FUNCTION webhook_secrets_cap();
