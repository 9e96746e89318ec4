//go:build race

package cluster

// raceEnabled builds the server processes with the race detector too, so a
// race in the code under test fails these tests as well.
const raceEnabled = true
