// Package protocol holds the wire types of the Genkit agent protocol
// (messages and their parts, session state, a turn's input, output and
// stream chunks, snapshots, and the Model interface with the request and
// response a model sees) with the JSON encoding the protocol specifies:
// unknown fields of a part or message are kept and sent back unchanged. It
// imports only the standard library (and the module's JSON helpers), so
// any Go program may share it.
package protocol
