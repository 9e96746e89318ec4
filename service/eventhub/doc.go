// Package eventhub fans the tenants' live events out to their subscribers
// (the event streams of httpapi): a Hub reads the event log through a
// store.EventSource when a LISTEN/NOTIFY wake-up or a one-second poll says
// there may be more, and replays what a reconnecting listener missed. It is
// a feature beside the turn engine: it imports the foundation (store, keys)
// and nothing of the engine (tests/layers).
package eventhub
