// Package streams keeps the frames of streaming turns durable: a Writer
// records a stream's frames in the store (batched), so a client that lost
// the connection can rejoin the stream on any instance, from the start or
// after the last frame it read, and the turn goes on without it; a Hub
// opens streams and follows them for the rejoins, woken by the store's
// notifications (LISTEN) and polling while those are down, and prunes the
// streams past their retention. It is a feature beside the turn engine: it
// owns its records and its Store interface, which service/pgstore
// implements, and imports the foundation (auth) and nothing of the engine
// (tests/layers).
package streams
