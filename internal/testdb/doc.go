// Package testdb gives every test its own PostgreSQL database, cloned from a
// template that is migrated once per set of migration files.
//
// The server comes from DATABASE_URL, an admin URL (a role allowed to create
// databases); `make test` provides one. Cloning a template takes a few
// milliseconds, so tests run in parallel without sharing any rows.
//
// Pool connects as the application role, as the server does, so a test sees
// what row-level security lets the server see; OwnerPool connects as the
// URL's role (the tables' owner) for a test's own set-up and assertions.
// No connection outlives the test that opened it.
//
// It imports the migrations and the generated db package, never service or
// service/pgstore: their own tests use it.
package testdb
