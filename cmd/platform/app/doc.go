// Package app is the whole Holdpoint platform as a library: the command
// line of cmd/platform (serve, migrate, tenants, keys, tokens, bench,
// doctor, version) serving the agents a program defines. Every flag of
// every command may also come from a HOLDPOINT_<FLAG> variable or a
// --config YAML file (config.go; the table is docs/configuration.md). A program's main is its
// agent definitions (package service/agentkit) and one call:
//
//	func main() {
//		app.Main(app.Platform{Agents: []agentkit.Definition{bankingAgent}})
//	}
//
// It is where the layers meet: it opens the pools, builds the store, the
// runtime and the HTTP API, and runs migrations, so it may import every
// package of the module; only commands import it.
package app
