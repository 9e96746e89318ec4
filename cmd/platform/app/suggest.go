package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// commands are the top-level commands, for suggestions.
var commands = []string{"serve", "migrate", "tenants", "prune", "agents", "keys", "tokens", "webhooks", "bench", "doctor", "version", "help"}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// suggest is the name among names closest to s within an edit distance of
// 2, or "" when none is that close.
func suggest(s string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// unknownCommand prints the one line for an unknown command of group
// ("platform" or "platform tenants") and returns the exit code 2.
func unknownCommand(stderr io.Writer, group, name string, names []string) int {
	hint := ""
	if s := suggest(name, names); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	help := "platform help"
	if group != "platform" {
		help = "platform help " + strings.TrimPrefix(group, "platform ")
	}
	fmt.Fprintf(stderr, "%s: unknown command %q%s; see %s\n", group, name, hint, help)
	return 2
}

// parseFlagSet parses args into fs the way parseFlags needs: -h prints the
// command's usage; a bad flag prints the flag package's one-line error, a
// suggestion for a mistyped flag name and where the help is, not the
// whole flag list.
func parseFlagSet(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	if usage == nil {
		usage = func() {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if errors.Is(err, flag.ErrHelp) {
		usage()
	} else if err != nil {
		fmt.Fprintf(out, "%s: %v\n", fs.Name(), err)
		if s := suggestFlag(fs, err); s != "" {
			fmt.Fprintf(out, "did you mean --%s?\n", s)
		}
		fmt.Fprintf(out, "see platform help %s\n", strings.TrimPrefix(fs.Name(), "platform "))
	}
	return err
}

// suggestFlag is the flag of fs closest to the undefined one err names.
func suggestFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	name = strings.TrimLeft(name, "-")
	name, _, _ = strings.Cut(name, "=")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	slices.Sort(names)
	return suggest(name, names)
}
