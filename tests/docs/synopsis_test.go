package docs

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flagRE finds the flags a synopsis line names: --name, possibly inside
// brackets or after a |.
var flagRE = regexp.MustCompile(`(?:^|[\s\[|])--([a-z][a-z0-9-]*)`)

// checkSynopsis checks a block of platform command lines (a synopsis, or
// commands with placeholders) against the built binary's help: every
// command is in `platform help`, every subcommand (a|b|c) in its line there,
// and every --flag in `platform help COMMAND [SUBCOMMAND]`. A command the
// binary is built without (bench, without -tags bench) has its flags
// unchecked.
func checkSynopsis(t *testing.T, b block) {
	t.Helper()
	bin := filepath.Join(platformBin(t), "platform")
	top, err := exec.Command(bin, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("platform help: %v\n%s", err, top)
	}
	for _, line := range strings.Split(strings.TrimSpace(b.text), "\n") {
		line, _, _ = strings.Cut(line, " #")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "platform" {
			t.Errorf("%s: %q is not a platform command", b, line)
			continue
		}
		cmd := words[1]
		helpLine := ""
		for _, l := range strings.Split(string(top), "\n") {
			if strings.HasPrefix(l, "  platform "+cmd+" ") {
				helpLine = l
			}
		}
		if helpLine == "" {
			t.Errorf("%s: platform help lists no command %s", b, cmd)
			continue
		}
		args := []string{"help", cmd}
		if len(words) > 2 && !strings.HasPrefix(words[2], "-") && !strings.HasPrefix(words[2], "[") {
			subs := strings.Split(words[2], "|")
			listed := strings.FieldsFunc(strings.Fields(helpLine)[2], func(r rune) bool { return r == '|' })
			for _, s := range subs {
				if !slices.Contains(listed, s) {
					t.Errorf("%s: platform %s has no subcommand %s (platform help: %s)", b, cmd, s, strings.TrimSpace(helpLine))
				}
			}
			if len(subs) == 1 {
				args = append(args, subs[0])
			}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if strings.Contains(string(out), "built without") {
			continue
		}
		if err != nil {
			t.Errorf("%s: platform %s: %v\n%s", b, strings.Join(args, " "), err, out)
			continue
		}
		for _, m := range flagRE.FindAllStringSubmatch(line, -1) {
			if !strings.Contains(string(out), "\n  -"+m[1]+"\n") && !strings.Contains(string(out), "\n  -"+m[1]+" ") {
				t.Errorf("%s: platform %s has no flag --%s", b, strings.Join(args[1:], " "), m[1])
			}
		}
	}
}
