// Package service is the turn engine: agents and their turns (run in the
// request or detached, durable across processes), interrupts and their
// approval, tool calls and their journal, sessions and snapshots. It
// persists only through the interfaces of service/store, which
// service/pgstore implements on PostgreSQL. What is not the engine lives
// beside it: the wire types and the Model interface (service/protocol),
// the Observer it reports to (service/observe), the live events' fan-out
// (service/eventhub), the durable streams of streamed turns
// (service/streams, which a turn feeds through its DetachedStream once it
// detaches), tenants, webhooks and retention.
//
// It must not import pgx, the generated db package, httpapi or Echo: the
// database stays behind those interfaces and the protocol in httpapi. The
// same holds for the packages under it other than service/pgstore;
// tests/layers checks it.
package service
