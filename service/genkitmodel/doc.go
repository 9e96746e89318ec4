// Package genkitmodel adapts Genkit Go model plugins (Google AI, Anthropic,
// OpenAI and OpenAI-compatible servers) to protocol.Model.
//
// The adapter calls the plugin's raw model action: it never uses Genkit's
// generate loop, so the model only answers and every tool request it makes
// comes back to our runtime, which runs the agent's tools itself. Messages
// are converted to and from Genkit's types only for the duration of a call.
//
// It imports service/protocol (for the Model interface and the messages)
// and Genkit, never the turn engine, the store or the HTTP layer: it is a
// feature beside the engine (tests/layers).
package genkitmodel
