// Package requestid carries the id of the request a context serves: httpapi
// puts it there (With), and the turn engine quotes it (From) in the message
// of an error whose text stays in the log (a tool's or a model's), so a
// client can report it and an operator find the cause. It imports only the
// standard library.
package requestid

import "context"

type key struct{}

// With returns ctx carrying the id of the request it serves.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the request id With put in ctx ("" if none).
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}
