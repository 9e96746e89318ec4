// Package client is a Go client of a Holdpoint server: the Genkit agent
// protocol the way the Genkit JS client's remoteAgent speaks it (chats that
// send, stream, pause on interrupts and resume from them, detached turns,
// snapshots, abort), plus the operators' API under /api/v1 (the approvals
// inbox, the interrupt report and the live event stream).
//
// A chat of a server-managed agent carries the snapshot id from turn to
// turn; a chat of a client-managed agent carries the state the server
// returned, signature included, byte for byte, as the JS client does.
//
// Every failure the server reports is an *Error with the protocol status
// (INVALID_ARGUMENT, NOT_FOUND, ABORTED, ...), whether it came as an HTTP
// status, as an error frame of a stream that had already answered 200, or
// as a turn that ended with finishReason "failed". Use errors.As, or
// errors.Is with the sentinels (ErrNotFound, ErrConflict, ...), or the
// helpers IsNotFound, IsConflict and StatusOf.
//
// The package depends on the standard library only and imports nothing else
// of this module (tests/layers checks it), so a program that talks to a
// Holdpoint server does not link the server.
package client
