// Package wait holds the loops that wait on time and on a context: a
// LISTEN connection kept up with backoff (KeepListening) and a function run
// at an interval (Every). It imports only the standard library.
package wait
