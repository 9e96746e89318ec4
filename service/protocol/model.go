package protocol

import (
	"context"
	"encoding/json"
)

// Model generates the next message of a conversation. Implementations are
// the built-in demo model, the conformance suite's programmable model, and
// adapters over Genkit Go model plugins (service/genkitmodel). A model only
// answers: it never runs tools itself; the runtime does.
type Model interface {
	// Name identifies the model in logs and configuration.
	Name() string
	// Generate answers req, which it must not modify (its messages are the
	// session's own). It may call onChunk for streamed pieces of the
	// answer before returning the whole message; onChunk is never nil.
	Generate(ctx context.Context, req *ModelRequest, onChunk func(ModelChunk)) (*ModelResponse, error)
}

// ModelRequest is what a model sees: the conversation (with the agent's
// system prompt as a leading system message), the tools it may request, and
// the agent's model configuration.
type ModelRequest struct {
	Messages []Message
	Tools    []ToolDefinition
	Config   json.RawMessage
}

// ToolDefinition describes a tool to a model.
type ToolDefinition struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// ModelResponse is a model's answer.
type ModelResponse struct {
	Message       Message `json:"message"`
	FinishReason  string  `json:"finishReason,omitempty"`
	FinishMessage string  `json:"finishMessage,omitempty"`
}
