-- +goose Up

-- Tenants own everything else. Every tenant-scoped table below leads its
-- primary key and indexes with tenant_id so a tenant's rows are contiguous
-- and the schema can later be distributed by tenant.
CREATE TABLE tenants (
    id         text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO tenants (id, name) VALUES ('default', 'Default tenant');

-- A session is a conversation under a client-chosen id. latest_snapshot_id
-- points at the newest snapshot written for it (the leaf a sessionId resumes).
CREATE TABLE sessions (
    tenant_id          text NOT NULL REFERENCES tenants (id),
    id                 text NOT NULL,
    agent              text NOT NULL,
    end_user           text,
    latest_snapshot_id text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- A snapshot is the state after one turn. History is not stored here: it is
-- rebuilt from the messages rows of the snapshot and its ancestors, limited
-- to message_count positions. custom and artifacts are the (small) session
-- state documents.
CREATE TABLE snapshots (
    tenant_id     text NOT NULL,
    id            text NOT NULL,
    session_id    text NOT NULL,
    agent         text NOT NULL,
    parent_id     text,
    status        text NOT NULL CHECK (status IN ('pending', 'completed', 'failed', 'aborted')),
    finish_reason text,
    error         jsonb,
    custom        jsonb,
    artifacts     jsonb,
    message_count integer NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    heartbeat_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, id)
);

CREATE INDEX snapshots_session_idx ON snapshots (tenant_id, session_id, created_at);

-- One row per message a snapshot wrote: the messages its turn appended, and
-- any earlier position it rewrote (a resume rewrites the interrupted model
-- message). The message at a position is the one written by the nearest
-- snapshot on the ancestor chain.
CREATE TABLE messages (
    tenant_id   text NOT NULL,
    snapshot_id text NOT NULL,
    position    integer NOT NULL CHECK (position >= 0),
    role        text NOT NULL,
    body        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, snapshot_id, position),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES snapshots (tenant_id, id)
);

-- One row per interrupted tool request. status moves pending -> resolved
-- (claimed by the resume that answers it) or pending -> expired/cancelled.
CREATE TABLE interrupts (
    tenant_id           text NOT NULL,
    id                  uuid NOT NULL,
    session_id          text NOT NULL,
    snapshot_id         text NOT NULL,
    agent               text NOT NULL,
    tool                text NOT NULL,
    ref                 text NOT NULL DEFAULT '',
    input               jsonb,
    metadata            jsonb,
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled')),
    expires_at          timestamptz,
    resolution          jsonb,
    resolved_by         text,
    resolved_at         timestamptz,
    resumed_snapshot_id text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, snapshot_id, tool, ref),
    FOREIGN KEY (tenant_id, snapshot_id) REFERENCES snapshots (tenant_id, id)
);

CREATE INDEX interrupts_inbox_idx ON interrupts (tenant_id, status, created_at DESC, id DESC);

-- +goose Down
DROP TABLE interrupts;
DROP TABLE messages;
DROP TABLE snapshots;
DROP TABLE sessions;
DROP TABLE tenants;
