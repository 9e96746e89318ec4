package service

import "context"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves. The
// runtime quotes it in the message of an error whose text stays in the log
// (a tool's or a model's), so a client can report it and an operator find
// the cause.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id WithRequestID put in ctx ("" if none).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
