// Package layers holds the tests that keep the module's packages in their
// layers, as each package's doc comment states them. Under service/ there
// are four: the foundation (service/protocol, the wire types, standard
// library only; service/events, the event names; service/schema, JSON
// Schema validation; service/store, the store's interfaces and records;
// service/auth, who a call acts for; service/keys, the tenants' signing
// keys and event ids; service/httptool, the HTTP client that calls out;
// service/readiness, whether the instance may take work; service/observe,
// the Observer the engine reports to; service/limits, the bounds on what a
// client sends; service/requestid, the id of the request a context
// serves; service/approval, a tool's approval policy; service/statesig,
// the signature of a client-managed state), the features
// (service/webhooks, service/retention and service/streams, the durable
// streams of streamed turns, which own their records and store interfaces;
// service/tenants, the tenants and their credentials; service/genkitmodel,
// the model adapters; service/telemetry, metrics and tracing;
// service/eventhub, the live events' fan-out; service/agentdef, the agents
// tenants define as data: none imports anything of the engine), the engine
// (package service, the turn engine, and the packages that build on it),
// and the store (service/pgstore, the one package that speaks SQL, which
// implements the foundation's and the features' interfaces without
// importing the engine). The engine imports neither pgx, nor the
// generated db package, nor pgstore, nor the HTTP edge; httpapi holds no
// SQL. It has no code of its own and is imported by nothing.
package layers
