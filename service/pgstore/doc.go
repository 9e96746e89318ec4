// Package pgstore is the PostgreSQL implementation of the stores the
// service package declares (store.Store, store.TenantStore,
// store.EventSource): sessions, turns, interrupts, jobs, tool calls,
// tenants and keys, live events. Every statement is scoped to one tenant
// in its SQL, runs under row-level security as the application role, and
// its errors pass through the one translator, translate. Only cmd, tests
// and the public entry point import it; service does not.
package pgstore
