package pgstore

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service"
)

var _ service.TenantAgentStore = (*PgStore)(nil)

// PutTenantAgent implements service.TenantAgentStore: versions of one name
// are numbered one after the other, under a lock of that name.
func (s *PgStore) PutTenantAgent(ctx context.Context, tenantID, name, source string, definition json.RawMessage, actor string) (*service.TenantAgentVersion, error) {
	var row db.PutTenantAgentVersionRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		if err := q.LockTenantAgentName(ctx, db.LockTenantAgentNameParams{TenantID: tenantID, Name: name}); err != nil {
			return err
		}
		var err error
		row, err = q.PutTenantAgentVersion(ctx, db.PutTenantAgentVersionParams{
			TenantID: tenantID, Name: name, Source: source, Definition: definition, CreatedBy: orSystem(actor),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &service.TenantAgentVersion{Version: int(row.Version), CreatedBy: orSystem(actor), CreatedAt: row.CreatedAt}, nil
}

// GetTenantAgent implements service.TenantAgentStore.
func (s *PgStore) GetTenantAgent(ctx context.Context, tenantID, name string, version int) (*service.TenantAgentRecord, error) {
	var row db.GetTenantAgentRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetTenantAgent(ctx, db.GetTenantAgentParams{TenantID: tenantID, Name: name, Version: int32(version)})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, service.ErrNotFound) {
		return nil, service.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &service.TenantAgentRecord{
		Name: row.Name, CurrentVersion: int(row.CurrentVersion), Version: int(row.Version), Definition: row.Definition,
		Source: row.Source, CreatedBy: row.CreatedBy, DisabledAt: row.DisabledAt, DisabledBy: deref(row.DisabledBy),
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, VersionCreatedAt: row.VersionCreatedAt,
	}, nil
}

// ListTenantAgents implements service.TenantAgentStore.
func (s *PgStore) ListTenantAgents(ctx context.Context, tenantID string) ([]service.TenantAgentRecord, error) {
	var rows []db.ListTenantAgentsRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantAgents(ctx, tenantID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]service.TenantAgentRecord, 0, len(rows))
	for _, r := range rows {
		out = append(out, service.TenantAgentRecord{
			Name: r.Name, CurrentVersion: int(r.CurrentVersion), Version: int(r.CurrentVersion), Definition: r.Definition,
			DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
	}
	return out, nil
}

// ListTenantAgentVersions implements service.TenantAgentStore.
func (s *PgStore) ListTenantAgentVersions(ctx context.Context, tenantID, name string) ([]service.TenantAgentVersion, error) {
	var rows []db.ListTenantAgentVersionsRow
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantAgentVersions(ctx, db.ListTenantAgentVersionsParams{TenantID: tenantID, Name: name})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]service.TenantAgentVersion, 0, len(rows))
	for _, r := range rows {
		out = append(out, service.TenantAgentVersion{Version: int(r.Version), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// DisableTenantAgent implements service.TenantAgentStore.
func (s *PgStore) DisableTenantAgent(ctx context.Context, tenantID, name, actor string) (bool, error) {
	var n int64
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		n, err = q.DisableTenantAgent(ctx, db.DisableTenantAgentParams{TenantID: tenantID, Name: name, Actor: strPtr(orSystem(actor))})
		return err
	})
	return n > 0, err
}

// TenantToolHosts implements service.TenantAgentStore.
func (s *PgStore) TenantToolHosts(ctx context.Context, tenantID string) ([]string, error) {
	var hosts []string
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		hosts, err = q.GetTenantToolHosts(ctx, tenantID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, service.ErrNotFound
	}
	return hosts, err
}

// SetTenantToolHosts implements service.TenantAgentStore. Changing a
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
		return service.ErrNotFound
	}
	return err
}
