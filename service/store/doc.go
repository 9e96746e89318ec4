// Package store is the seam between the turn engine and its database: the
// interfaces the engine calls (Store and the stores of tenants, streams
// and tenant agents), the records they pass, and the errors they answer
// (ErrNotFound, ErrUnavailable, the protocol's Error). Both the engine
// (package service) and its PostgreSQL implementation (service/pgstore)
// import it, so the implementation never imports the engine, as river's
// riverdriver sits between river and its drivers. The features beside the
// engine (service/webhooks, service/retention) own their records and store
// interfaces; pgstore implements those too.
package store
