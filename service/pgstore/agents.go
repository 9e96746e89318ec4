package pgstore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/store"
)

var _ store.TenantAgentStore = (*PgStore)(nil)

// PutTenantAgent implements store.TenantAgentStore: versions of one name
// are numbered one after the other, under a lock of that name in any case,
// which also keeps the name from being taken meanwhile: by the tenant's
// agent of the name in another case, or a compiled agent's recorded
// (ALREADY_EXISTS naming it).
func (s *PgStore) PutTenantAgent(ctx context.Context, tenantID, name, source string, definition json.RawMessage, actor string) (*store.TenantAgentVersion, error) {
	var row db.PutTenantAgentVersionRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		if err := q.LockAgentName(ctx, name); err != nil {
			return err
		}
		taken, err := q.AgentNameTaken(ctx, db.AgentNameTakenParams{TenantID: tenantID, Name: name})
		if err != nil {
			return err
		}
		if err := nameTaken(name, taken); err != nil {
			return err
		}
		row, err = q.PutTenantAgentVersion(ctx, db.PutTenantAgentVersionParams{
			TenantID: tenantID, Name: name, Source: source, Definition: definition, CreatedBy: orSystem(actor),
		})
		return err
	})
	if err != nil {
		return nil, translateConflict(err, "agent %q: the tenant has an agent of that name in another case", name)
	}
	return &store.TenantAgentVersion{Version: int(row.Version), CreatedBy: orSystem(actor), CreatedAt: row.CreatedAt}, nil
}

// nameTaken is the refusal of a name something else has, or nil.
func nameTaken(name string, taken db.AgentNameTakenRow) error {
	switch {
	case taken.Compiled != "":
		return store.Errorf(store.CodeAlreadyExists,
			"agent %q: %q is one of this server's own agents (compiled into an instance that serves this database): choose another name", name, taken.Compiled)
	case taken.TenantAgent != "":
		return store.Errorf(store.CodeAlreadyExists,
			"agent %q: this tenant already has the agent %q, and names are unique whatever their case: choose another name, or PUT %q", name, taken.TenantAgent, taken.TenantAgent)
	}
	return nil
}

// RecordCompiledAgents records the names of the agents an instance has
// compiled in, which no tenant may then define, and returns the tenants'
// agents (of every tenant) that already have one of them in any case.
func (s *PgStore) RecordCompiledAgents(ctx context.Context, instance string, names []string) ([]store.TenantAgentName, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var rows []db.RecordCompiledAgentsRow
	err := s.tx(ctx, func(q *db.Queries) error {
		var err error
		rows, err = q.RecordCompiledAgents(ctx, db.RecordCompiledAgentsParams{Instance: instance, Names: names})
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]store.TenantAgentName, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.TenantAgentName{TenantID: r.TenantID, Name: r.Name})
	}
	return out, nil
}

// GetTenantAgent implements store.TenantAgentStore.
func (s *PgStore) GetTenantAgent(ctx context.Context, tenantID, name string, version int) (*store.TenantAgentRecord, error) {
	var row db.GetTenantAgentRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetTenantAgent(ctx, db.GetTenantAgentParams{TenantID: tenantID, Name: name, Version: int32(version)})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, store.ErrNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &store.TenantAgentRecord{
		Name: row.Name, CurrentVersion: int(row.CurrentVersion), Version: int(row.Version), Definition: row.Definition,
		Source: row.Source, CreatedBy: row.CreatedBy, DisabledAt: row.DisabledAt, DisabledBy: deref(row.DisabledBy),
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, VersionCreatedAt: row.VersionCreatedAt,
	}, nil
}

// ListTenantAgents implements store.TenantAgentStore.
func (s *PgStore) ListTenantAgents(ctx context.Context, tenantID string) ([]store.TenantAgentRecord, error) {
	var rows []db.ListTenantAgentsRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantAgents(ctx, tenantID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.TenantAgentRecord, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.TenantAgentRecord{
			Name: r.Name, CurrentVersion: int(r.CurrentVersion), Version: int(r.CurrentVersion), Definition: r.Definition,
			DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
	}
	return out, nil
}

// ListTenantAgentVersions implements store.TenantAgentStore.
func (s *PgStore) ListTenantAgentVersions(ctx context.Context, tenantID, name string) ([]store.TenantAgentVersion, error) {
	var rows []db.ListTenantAgentVersionsRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantAgentVersions(ctx, db.ListTenantAgentVersionsParams{TenantID: tenantID, Name: name})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.TenantAgentVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.TenantAgentVersion{Version: int(r.Version), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// DisableTenantAgent implements store.TenantAgentStore.
func (s *PgStore) DisableTenantAgent(ctx context.Context, tenantID, name, actor string) (bool, error) {
	var n int64
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		n, err = q.DisableTenantAgent(ctx, db.DisableTenantAgentParams{TenantID: tenantID, Name: name, Actor: strPtr(orSystem(actor))})
		return err
	})
	return n > 0, err
}

// TenantToolHosts implements store.TenantAgentStore.
func (s *PgStore) TenantToolHosts(ctx context.Context, tenantID string) ([]string, error) {
	var hosts []string
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		hosts, err = q.GetTenantToolHosts(ctx, tenantID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return hosts, err
}

// SetTenantToolHosts implements store.TenantAgentStore. Changing a
// tenant row is the operator's: it needs a pool of the schema owner.
func (s *PgStore) SetTenantToolHosts(ctx context.Context, tenantID string, hosts []string) error {
	if hosts == nil {
		hosts = []string{}
	}
	var n int64
	err := s.tx(ctx, func(q *db.Queries) error {
		var err error
		n, err = q.SetTenantToolHosts(ctx, db.SetTenantToolHostsParams{TenantID: tenantID, Hosts: hosts})
		return err
	})
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}
