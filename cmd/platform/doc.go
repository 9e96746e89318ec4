// Command platform is the Holdpoint server: it serves the agents over the
// Genkit agent protocol (serve), manages the database schema (migrate), and
// reports its build (version).
//
// It is where the layers meet: it opens the pools, builds the store, the
// runtime and the HTTP API, and runs migrations, so it may import every
// package of the module; nothing imports it.
package main
