// Package limits bounds what a client may send in one invocation: the
// client-managed state of its init, its message and resume, and the ids it
// chooses (CheckInit, CheckInput, CheckID and the Max constants). The turn
// engine applies them to every caller, in process or over HTTP. It imports
// the foundation only (service/protocol, service/store).
package limits
