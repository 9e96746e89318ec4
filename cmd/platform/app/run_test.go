package app

import "io"

// run is cmd/platform's command line: the platform with the demo agents.
func run(args []string, stdout, stderr io.Writer) int {
	return Platform{Demo: true}.Run(args, stdout, stderr)
}
