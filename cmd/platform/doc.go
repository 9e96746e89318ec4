// Command platform is the Holdpoint server with the built-in demo agents:
// it serves agents over the Genkit agent protocol (serve), manages the
// database schema (migrate), tenants, API keys and user tokens, measures
// (bench), and reports its build (version). All of it lives in package
// github.com/holdpoint/holdpoint/cmd/platform/app, which a program that
// serves its own agents calls the same way.
package main
