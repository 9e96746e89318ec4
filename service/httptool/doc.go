// Package httptool is the client the platform uses to call a tenant's HTTP
// tool: a webhook-style POST of a JSON body to the tenant's backend, done the
// way payment webhooks are done.
//
// Every call is signed as Standard Webhooks (https://www.standardwebhooks.com)
// prescribe: the headers webhook-id (the call id, the same on every retry),
// webhook-timestamp (unix seconds) and webhook-signature ("v1,<base64 of
// HMAC-SHA256(secret, id.timestamp.body)>", one per secret so that secrets
// can be rotated with an overlap); Idempotency-Key repeats the call id.
// [Sign] computes one signature and [Verify] checks them, which is what a
// webhook receiver does.
//
// One tool secret signs all of a tenant's tools, so a signature alone does
// not say which tool a call was for: the body ([ToolCall]) names the
// tenant, the agent, the tool, the URL called and the call id, and a tool
// receiver checks them with [VerifyToolCall] (signature, timestamp, tool,
// URL), then executes each call id once. Otherwise a call the model made
// to a harmless tool, replayed to an approval-gated tool's endpoint, would
// run there without the approval.
//
// A tool URL is the tenant's input, so the client guards against server-side
// request forgery. [CheckURL] validates a URL when the tool is defined; a
// [Client] checks it again on every call and, when it must open a
// connection, resolves the host itself, refuses when any address it
// resolves to is not public (loopback, private, link-local, unique local,
// CGNAT, multicast, broadcast, unspecified, reserved, and the IPv4-mapped,
// NAT64 and 6to4 forms of those) unless the [Policy] allows it, and then
// dials the vetted address itself, so DNS rebinding between the check and
// the connection cannot happen; the dialer checks the address it connects
// to once more just before connecting. A call over a pooled connection
// (one Client per policy, so dialed to an address vetted under the same
// policy) resolves nothing. TLS is
// verified against the URL's host name. Redirects are never followed and no
// environment proxy is used.
//
// [Client.Do] bounds each attempt by a timeout and the response body by a
// size, retries network errors, timeouts and 5xx answers with a jittered
// exponential backoff, and classifies a failure by a [Kind] in a [CallError].
//
// Like the rest of service, it must not import pgx, the generated db
// package, httpapi or Echo; it uses the standard library only.
package httptool
