package service

// Store is the persistence the runtime needs. PgStore implements it on
// PostgreSQL.
type Store interface{}
