// Package httpapi serves the agent runtime over HTTP: the Genkit agent
// protocol routes, the /api/v1 routes (interrupts and their events, tool
// calls, reports, user tokens), health checks, and the error mapping from
// domain errors to protocol status codes. It decodes, calls service, and
// encodes; it holds no SQL and no domain rules.
//
// It imports service and Echo, never pgx, the generated db package or
// service/pgstore (tests/layers checks it).
package httpapi
