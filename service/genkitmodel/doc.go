// Package genkitmodel adapts Genkit Go model plugins (Google AI, Anthropic,
// OpenAI and OpenAI-compatible servers) to service.Model.
//
// The adapter calls the plugin's raw model action: it never uses Genkit's
// generate loop, so the model only answers and every tool request it makes
// comes back to our runtime, which runs the agent's tools itself. Messages
// are converted to and from Genkit's types only for the duration of a call.
//
// It imports service (for the Model interface) and Genkit, never the store
// or the HTTP layer.
package genkitmodel
