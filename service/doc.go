// Package service is the agent runtime and the domain it owns: agents and
// their turns (run in the request or detached, durable across processes),
// interrupts and their approval, tool calls and their journal, sessions and
// snapshots, tenants, API keys and user tokens, and live interrupt events.
// It persists only through the interfaces it declares (Store, TenantStore,
// EventSource), which service/pgstore implements on PostgreSQL.
//
// It must not import pgx, the generated db package, httpapi or Echo: the
// database stays behind those interfaces and the protocol in httpapi. The
// same holds for the packages under it other than service/pgstore;
// tests/layers checks it.
package service
