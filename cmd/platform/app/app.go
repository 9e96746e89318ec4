package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// Version is the build's version, printed by `version`; set it at build
// time with -ldflags "-X github.com/holdpoint/holdpoint/cmd/platform/app.Version=v1.2.3".
var Version = "dev"

// defaultDatabaseURL is the local server a fresh machine (or `make run`)
// provides when DATABASE_URL is unset.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/holdpoint?sslmode=disable"

const usage = `Holdpoint: AI agents whose turns pause for a human, stored in PostgreSQL.

Usage:
  platform serve [--addr 127.0.0.1:8080] [--dev]   run the server (--dev: no authentication, loopback only)
  platform migrate up|status                        apply or list database migrations
  platform tenants create|list|show|set-retention|rotate-secret|tool-secret|allow-tool-hosts
                                                    manage tenants, their retention, signing keys and HTTP tools' secret and hosts
  platform prune [--tenant ID] [--dry-run]          delete what tenants' retention policies let go
  platform agents apply|list|show|disable            manage a tenant's own agents (.prompt files)
  platform keys create|list|revoke                  manage a tenant's API keys
  platform tokens mint|revoke                       mint or revoke user tokens for end users
  platform webhooks create|list|show|update|delete|rotate-secret|deliveries|redeliver
                                                    manage a tenant's webhook endpoints and deliveries
  platform bench [--mode inprocess|http]            measure the approval cycle on a fresh database
                 [--waits] [--idle-sessions N] [--streams N] [--soak 10m] [--markdown FILE]
                                                    (in builds with -tags bench: make bench)
  platform doctor [serve flags]                     check the database, migrations, role, model keys and address serve would use
  platform version                                  print the build version
  platform help [COMMAND [SUBCOMMAND] | config]     print this, a command's help, or the configuration table

The database comes from DATABASE_URL (default ` + defaultDatabaseURL + `).
Run "platform help <command>" for the flags of a command. Every flag can also
come from HOLDPOINT_<FLAG> or a --config YAML file: "platform help config"
prints the table.
`

// Main runs the command line of the process (os.Args) with p and exits
// with its code. A program that serves its own agents calls it from main:
//
//	func main() { app.Main(app.Platform{Agents: []agentkit.Definition{bankingAgent}}) }
func Main(p Platform) {
	tuneGC()
	os.Exit(p.Run(os.Args[1:], os.Stdout, os.Stderr))
}

// Run runs one command line (without the program name) and returns the exit
// code: 0 success, 1 a failure while running, 2 a usage error.
func (p Platform) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveCommand(p, args[1:], stderr)
	case "migrate":
		return migrateCommand(args[1:], stdout, stderr)
	case "tenants":
		return tenantsCommand(args[1:], stdout, stderr)
	case "agents":
		return agentsCommand(p, args[1:], stdout, stderr)
	case "keys":
		return keysCommand(args[1:], stdout, stderr)
	case "tokens":
		return tokensCommand(args[1:], stdout, stderr)
	case "webhooks":
		return webhooksCommand(args[1:], stdout, stderr)
	case "bench":
		return benchCommand(args[1:], stdout, stderr)
	case "prune":
		return pruneCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "platform %s %s %s/%s\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "doctor":
		return doctorCommand(p, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[1] != "config" && slices.Contains(commands, args[1]) && args[1] != "help" {
			// platform help serve, platform help tenants create: the
			// command's own help.
			return p.Run(append(slices.Clone(args[1:]), "-h"), stdout, stderr)
		}
		if len(args) > 1 && args[1] == "config" {
			if err := writeConfigurationDoc(stdout); err != nil {
				fmt.Fprintln(stderr, "platform help config:", err)
				return 1
			}
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		return unknownCommand(stderr, "platform", args[0], commands)
	}
}

// logFlags are the logging flags every command takes.
type logFlags struct {
	format string
	level  string
	// dev is serve's --dev: the automatic format is then text for a
	// person, coloured on a terminal.
	dev bool
}

// register adds the logging flags to fs.
func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "auto", "log format on stderr: json, text or auto (with serve --dev, text, coloured on a terminal unless NO_COLOR is set; else json)")
	fs.StringVar(&l.level, "log-level", "info", "lowest level logged: debug, info, warn or error")
}

// Log formats logFormat chooses.
const (
	formatJSON  = "json"
	formatText  = "text"
	formatColor = "color" // text with ANSI colours, for a terminal
)

// logFormat is the format the flags ask for: an explicit json or text
// wins; auto is coloured text under --dev on a terminal (unless NO_COLOR
// is set to anything non-empty), plain text under --dev elsewhere, and
// JSON otherwise, for log collectors.
func logFormat(name string, dev, terminal bool, noColor string) (string, error) {
	switch strings.ToLower(name) {
	case formatJSON:
		return formatJSON, nil
	case formatText:
		return formatText, nil
	case "auto", "":
		switch {
		case !dev:
			return formatJSON, nil
		case terminal && noColor == "":
			return formatColor, nil
		default:
			return formatText, nil
		}
	}
	return "", fmt.Errorf("--log-format %q: want json, text or auto", name)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// logger builds the slog logger the flags ask for.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	format, err := logFormat(l.format, l.dev, isTerminal(w), os.Getenv("NO_COLOR"))
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case formatColor:
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly})), nil
	case formatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
}

// parseFlags parses a command's flags, then fills those the command line
// left unset from the environment and the --config file (see
// applySources); it adds --config to fs first. It returns the exit code to
// use when the command must stop here (help asked: 0, bad flags, a bad
// variable or config file: 2), or -1 to go on.
func parseFlags(fs *flag.FlagSet, args []string) int {
	addConfigFlag(fs)
	if err := parseFlagSet(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := applySources(fs, os.Getenv); err != nil {
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		return 2
	}
	return -1
}

// databaseURL is the PostgreSQL server to use.
func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultDatabaseURL
}
