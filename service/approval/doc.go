// Package approval holds the approval policy a tool may carry (Policy,
// Tool.Approval in package service): the platform, not the model, asks a
// human before a gated call runs. It defines the policy and its bounds,
// checks it for the agent's author (Validate), and says what the turn
// engine's approval gate writes and reads in a gated call's history: the
// gate's marker in metadata.interrupt (GateMeta, GateOf, StripGate), the
// model's explanation kept with the call (Explanation), an approver's edit
// (Edited) and whether two restarts approve the same call (Same). The
// engine (package service) pauses, decides and runs gated calls; the
// agents defined as data (service/agentdef) and in Go (service/agentkit)
// build policies without it. It imports the foundation only
// (service/protocol, service/store, service/auth).
package approval
