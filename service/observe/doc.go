// Package observe declares what the turn engine and the features report for
// metrics: the Observer interface, its no-op implementation and the labels
// and kinds its methods are called with. service/telemetry implements it on
// Prometheus; the engine (package service) calls it. It imports only the
// standard library, so a package that implements it need not import the
// engine.
package observe
