// Package limits holds the bounds the turn engine applies to every caller,
// in process or over HTTP: what a client may send in one invocation (the
// client-managed state of its init, its message and resume, and the ids it
// chooses: CheckInit, CheckInput, CheckID and the Max constants), what one
// turn may make the server do whatever the model asks (Turn), and how many
// detached turns run and wait (Detach). It imports the foundation only
// (service/protocol, service/store).
package limits
