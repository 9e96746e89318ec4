package service

// The wire types of the Genkit agent protocol are defined in package
// protocol, which the Go client may share; the engine names them as its
// own so that agents written against package service read as before.

import "github.com/holdpoint/holdpoint/service/protocol"

type (
	Part           = protocol.Part
	Metadata       = protocol.Metadata
	ToolRequest    = protocol.ToolRequest
	ToolResponse   = protocol.ToolResponse
	Message        = protocol.Message
	Artifact       = protocol.Artifact
	SessionState   = protocol.SessionState
	Resume         = protocol.Resume
	AgentInput     = protocol.AgentInput
	AgentInit      = protocol.AgentInit
	ErrorDetails   = protocol.ErrorDetails
	AgentOutput    = protocol.AgentOutput
	ModelChunk     = protocol.ModelChunk
	TurnEnd        = protocol.TurnEnd
	PatchOp        = protocol.PatchOp
	StreamChunk    = protocol.StreamChunk
	Snapshot       = protocol.Snapshot
	SnapshotLookup = protocol.SnapshotLookup
	AbortResult    = protocol.AbortResult
	Model          = protocol.Model
	ModelRequest   = protocol.ModelRequest
	ModelResponse  = protocol.ModelResponse
	ToolDefinition = protocol.ToolDefinition
)

const (
	RoleUser          = protocol.RoleUser
	RoleModel         = protocol.RoleModel
	RoleTool          = protocol.RoleTool
	RoleSystem        = protocol.RoleSystem
	FinishStop        = protocol.FinishStop
	FinishLength      = protocol.FinishLength
	FinishBlocked     = protocol.FinishBlocked
	FinishInterrupted = protocol.FinishInterrupted
	FinishOther       = protocol.FinishOther
	FinishUnknown     = protocol.FinishUnknown
	FinishAborted     = protocol.FinishAborted
	FinishDetached    = protocol.FinishDetached
	FinishFailed      = protocol.FinishFailed
	StatusPending     = protocol.StatusPending
	StatusCompleted   = protocol.StatusCompleted
	StatusFailed      = protocol.StatusFailed
	StatusAborted     = protocol.StatusAborted
	StatusExpired     = protocol.StatusExpired
)

var (
	JSONTypeName  = protocol.JSONTypeName
	JSONEqual     = protocol.JSONEqual
	TextPart      = protocol.TextPart
	CloneMetadata = protocol.CloneMetadata
	// resolvedMeta moves metadata.interrupt to metadata.resolvedInterrupt.
	resolvedMeta = protocol.ResolvedMetadata
)
