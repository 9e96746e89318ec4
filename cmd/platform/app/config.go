package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "HOLDPOINT_"

// configFlag is the flag that names the configuration file.
const configFlag = "config"

// maxConfigSize bounds the configuration file read.
const maxConfigSize = 1 << 20

// envName is the environment variable that sets a flag:
// HOLDPOINT_WEBHOOK_TIMEOUT for --webhook-timeout.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// addConfigFlag adds --config to fs unless it has it already.
func addConfigFlag(fs *flag.FlagSet) {
	if fs.Lookup(configFlag) == nil {
		fs.String(configFlag, "", "YAML file of flag values (keys are flag names, e.g. addr: 127.0.0.1:8080); "+
			"a flag on the command line wins over its "+envPrefix+"* variable, which wins over the file")
	}
}

// applySources sets every flag of fs that the command line left unset:
// from its environment variable (envName; empty counts as unset) if there
// is one, else from the configuration file --config names (itself
// settable by HOLDPOINT_CONFIG). The precedence is therefore command line,
// environment, file, default. It runs after fs.Parse and may run again
// after another Parse of the same set (commands that take flags between
// positional arguments): a flag set by an earlier run counts as set.
//
// The file is written for serve: a key that is a serve flag but not one of
// fs is skipped, so that every command can read serve's file for the flags
// it shares (log-format, log-level); any other unknown key, a value the
// flag refuses, or an unreadable file is an error naming the file, the key
// and its line.
func applySources(fs *flag.FlagSet, getenv func(string) string) error {
	set := flagsSet(fs)
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s (--%s): invalid value %q: %w", name, f.Name, v, err))
			return
		}
		set[f.Name] = true
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	path := fs.Lookup(configFlag).Value.String()
	if path == "" {
		return nil
	}
	entries, err := readConfig(path)
	if err != nil {
		return err
	}
	var serve map[string]bool
	for _, e := range entries {
		if e.key == configFlag {
			return fmt.Errorf("%s:%d: key %s: a configuration file cannot name another", path, e.line, e.key)
		}
		if fs.Lookup(e.key) == nil {
			if serve == nil {
				serve = serveFlagNames()
			}
			if serve[e.key] {
				continue
			}
			return fmt.Errorf("%s:%d: unknown key %q: want the name of a flag of %s, without dashes (see %s -h)", path, e.line, e.key, fs.Name(), fs.Name())
		}
		if set[e.key] {
			continue
		}
		if err := fs.Set(e.key, e.value); err != nil {
			return fmt.Errorf("%s:%d: key %s: invalid value %q: %w", path, e.line, e.key, e.value, err)
		}
	}
	return nil
}

// configEntry is one key of a configuration file.
type configEntry struct {
	key, value string
	line       int
}

// readConfig reads a configuration file: a YAML mapping from flag names to
// scalars, or to lists of scalars, which become comma-separated values
// (webhook-retries: [5s, 30s] is --webhook-retries 5s,30s). An empty file
// sets nothing.
func readConfig(path string) ([]configEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if len(src) > maxConfigSize {
		return nil, fmt.Errorf("--config %s: larger than %d bytes", path, maxConfigSize)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of flag names to values (addr: 127.0.0.1:8080)", path, root.Line)
	}
	var out []configEntry
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s:%d: a key must be a flag name", path, k.Line)
		}
		if first, dup := seen[k.Value]; dup {
			return nil, fmt.Errorf("%s:%d: key %s is already set on line %d", path, k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		value, err := configValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: key %s: %w", path, v.Line, k.Value, err)
		}
		out = append(out, configEntry{key: k.Value, value: value, line: k.Line})
	}
	return out, nil
}

// configValue is the flag value a YAML value stands for.
func configValue(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", errors.New("no value")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return "", errors.New("a list may hold only plain values")
			}
			parts = append(parts, item.Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", errors.New("want a value or a list of values")
}

// serveFlagNames are the names of serve's flags, which a configuration
// file may hold whatever command reads it.
func serveFlagNames() map[string]bool {
	fs, _, _ := serveFlags(io.Discard)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}
