// Package layers holds the test that keeps the module's packages in their
// layers, as each package's doc comment states them: the runtime (service
// and the packages under it, service/pgstore aside) imports neither pgx,
// nor the generated db package, nor the HTTP edge; service/pgstore, the one
// seam between the runtime and PostgreSQL, does not import the HTTP edge;
// httpapi holds no SQL and imports neither pgx nor db. It has no code of its
// own and is imported by nothing.
package layers
