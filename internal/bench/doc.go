// Package bench measures the approval cycle: a user message, the model asks
// for approval (the turn pauses on an interrupt, persisted), the approval is
// sent back, the model answers (persisted). It drives the same runtime,
// store and HTTP stack as the server, with an instant stub model, and
// reports throughput, latency, database round trips and storage per cycle.
//
// It is a client of the layers, like cmd/platform/app (which runs it as
// `platform bench`): it may import service, service/pgstore and httpapi,
// and only cmd/platform/app imports it.
package bench
