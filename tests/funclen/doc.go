// Package funclen holds the test that keeps every function of the module
// short enough to read in one screen: at most 60 lines of body, outside
// tests and generated code. It has no code of its own and is imported by
// nothing.
package funclen
