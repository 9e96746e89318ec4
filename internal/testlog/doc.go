// Package testlog gives tests a *slog.Logger that writes to the test's own
// output (as t.Log does), so what the code under test logs is printed next
// to the test that failed and not at all for tests that pass. It imports
// only the standard library.
package testlog
