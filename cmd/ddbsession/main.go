package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Exit codes, for scripts; the package documentation lists them.
const (
	exitOK       = 0
	exitFailure  = 1 // DynamoDB, the network or the AWS configuration failed
	exitUsage    = 2 // the command line is wrong
	exitNotFound = 3 // the table, user or session named does not exist
	exitDeclined = 4 // the confirmation was declined, or could not be asked
	exitSchema   = 5 // the table does not fit the layout or the command, records none, or another than a flag gives
	exitTTL      = 6 // table check/create: it fits, but TTL is off or elsewhere, or no layout is recorded
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command's entry point: it runs the command that args name
// and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newEnv(stdin, stdout, stderr).run(ctx, args)
}

// env is what a command runs with: its streams, the clock, and how it
// reaches DynamoDB. Tests replace the clock and the connection.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// isTerminal reports whether a stream is a terminal, which decides
	// between a progress bar and plain lines, and whether a question can
	// be asked.
	isTerminal func(stream any) bool
	now        func() time.Time
	// sleep waits d, or until ctx ends. The pacing of sweep and count
	// waits through it alone.
	sleep   func(ctx context.Context, d time.Duration) error
	connect func(ctx context.Context, o *options) (Client, error)
	getenv  func(key string) string
}

func newEnv(stdin io.Reader, stdout, stderr io.Writer) *env {
	return &env{
		stdin: stdin, stdout: stdout, stderr: stderr,
		isTerminal: isTerminal,
		now:        time.Now,
		sleep:      sleep,
		connect:    connectAWS,
		getenv:     os.Getenv,
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// A command is one leaf of the command tree, such as "sessions list".
type command struct {
	path    string   // the words that name it
	args    []string // its positional arguments, for the usage line
	summary string   // one line, for the list of commands
	help    string   // what it does, its output and an example
	// flags registers the command's own flags; the table and layout
	// flags are registered for every command that talks to DynamoDB.
	flags func(fs *flag.FlagSet, o *options)
	// indexOnly, if set, says why the command cannot work in a hash-only
	// table, which has no per-user index.
	indexOnly string
	run       func(ctx context.Context, e *env, c *command, o *options, args []string) int
}

// commands is the command tree, in the order the help lists it.
var commands = []*command{
	tableCreateCommand,
	tableCheckCommand,
	sessionsListCommand,
	sessionsRevokeCommand,
	sessionsRevokeAllCommand,
	sessionsRevokeEveryoneCommand,
	sessionsExpiringCommand,
	historyCommand,
	sweepCommand,
	countCommand,
	importCommand,
}

func (e *env) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, topUsage())
		return exitUsage
	}
	switch args[0] {
	case "version", "-version", "--version":
		return e.runVersion(args[1:])
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, _ := find(args[1:]); c != nil {
				fmt.Fprint(e.stdout, c.usage())
				return exitOK
			}
			if len(args) == 2 && args[1] == "version" {
				fmt.Fprint(e.stdout, versionHelp)
				return exitOK
			}
			fmt.Fprintf(e.stderr, "ddbsession: no command %q\n\n%s", strings.Join(args[1:], " "), topUsage())
			return exitUsage
		}
		fmt.Fprint(e.stdout, topUsage())
		return exitOK
	}
	c, rest := find(args)
	if c == nil {
		words := args
		if i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") }); i >= 0 {
			words = args[:i]
		}
		fmt.Fprintf(e.stderr, "ddbsession: no command %q\n\n%s", strings.Join(words, " "), topUsage())
		return exitUsage
	}
	o := &options{}
	fs := c.flagSet(o)
	if err := e.flagsFromEnv(fs); err != nil {
		return e.usageError(c, err)
	}
	pos, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(e.stdout, c.usage())
		return exitOK
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	if err == nil {
		err = c.checkArgs(pos)
	}
	if err == nil {
		err = o.validate(c)
	}
	if err != nil {
		return e.usageError(c, err)
	}
	return c.run(ctx, e, c, o, pos)
}

// flagsFromEnv sets the table and layout flags from the environment, where
// a variable stands for each: DDBSESSION_TABLE for -table,
// DDBSESSION_EXPIRY_INDEX for -expiry-index. The command line, parsed
// after, wins. A layout flag set so is an override like any other, held
// to the table's record.
func (e *env) flagsFromEnv(fs *flag.FlagSet) error {
	for _, name := range commonFlagNames {
		if slices.Contains([]string{"json", "region", "profile"}, name) {
			continue // output is the caller's; the SDK has AWS_REGION and AWS_PROFILE
		}
		key := flagEnv(name)
		if v := e.getenv(key); v != "" {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("%s=%q: %v", key, v, err)
			}
		}
	}
	return nil
}

// flagEnv is the environment variable that stands for flag name.
func flagEnv(name string) string {
	return "DDBSESSION_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// usageError says what is wrong with the command line, and returns the
// exit code for it.
func (e *env) usageError(c *command, err error) int {
	fmt.Fprintf(e.stderr, "ddbsession %s: %v\nRun 'ddbsession %s -h' for help.\n", c.path, err, c.path)
	return exitUsage
}

// find returns the command that args begin with, and the rest of args.
func find(args []string) (*command, []string) {
	for _, c := range commands {
		words := strings.Fields(c.path)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c, args[len(words):]
		}
	}
	return nil, nil
}

// flagSet returns the command's flags, writing into o.
func (c *command) flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("ddbsession "+c.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if c.flags != nil {
		c.flags(fs, o)
	}
	o.register(fs)
	return fs
}

// checkArgs checks the number of positional arguments.
func (c *command) checkArgs(pos []string) error {
	switch {
	case len(pos) < len(c.args):
		return fmt.Errorf("missing %s", strings.Join(c.args[len(pos):], " "))
	case len(pos) > len(c.args):
		return fmt.Errorf("unexpected argument %q", pos[len(c.args)])
	}
	for i, p := range pos {
		if p == "" {
			return fmt.Errorf("%s is empty", c.args[i])
		}
	}
	return nil
}

// parseInterspersed parses flags wherever they are among the positional
// arguments, as "sessions list USER#alice -sk PROFILE" puts them, and
// returns the positional ones. After "--" every argument is positional,
// for a USER that starts with "-".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usage is the command's -h text.
func (c *command) usage() string {
	var b strings.Builder
	line := "Usage: ddbsession " + c.path + " [flags]"
	for _, a := range c.args {
		line += " " + a
	}
	fmt.Fprintf(&b, "%s\n\n%s\n", line, strings.TrimSpace(c.help))
	o := &options{}
	fs := c.flagSet(o)
	own := &strings.Builder{}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(commonFlagNames, f.Name) {
			printFlag(own, f)
		}
	})
	if own.Len() > 0 {
		fmt.Fprintf(&b, "\nFlags:\n%s", own)
	}
	b.WriteString("\nTable and layout flags (the layout is the one the table records; a layout flag given\nmust agree with it):\n")
	for _, name := range commonFlagNames {
		if f := fs.Lookup(name); f != nil {
			printFlag(&b, f)
		}
	}
	b.WriteString("\n" + exitCodesHelp)
	return b.String()
}

// printFlag prints f as flag.PrintDefaults would.
func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  -" + f.Name
	if name != "" {
		line += " " + name
	}
	line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
	switch {
	case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0" || f.DefValue == "0s":
	case fmt.Sprintf("%T", f.Value) == "*flag.stringValue":
		line += fmt.Sprintf(" (default %q)", f.DefValue)
	default:
		line += " (default " + f.DefValue + ")"
	}
	fmt.Fprintln(w, line)
}

const exitCodesHelp = `Exit codes: 0 ok; 1 DynamoDB, the network or the AWS configuration failed;
2 usage error; 3 not found (table, user or session); 4 declined (the
confirmation was refused, or stdin is not a terminal and -yes is missing);
5 the table does not fit the layout, records no layout (a command that
acts), or records another than a layout flag gives; 6 it fits, but TTL is
off or elsewhere, or it records no layout yet (table check).
`

func topUsage() string {
	var b strings.Builder
	b.WriteString(`Usage: ddbsession COMMAND [flags] [arguments]

Operates a ddbsession table: creates and checks it, lists and revokes
sessions, lists those about to expire, sweeps expired items, counts
live sessions and imports scs sessions from Redis. It reaches DynamoDB through the AWS SDK's usual
configuration (AWS_PROFILE, AWS_REGION, the credential chain;
AWS_ENDPOINT_URL_DYNAMODB for a local engine, dynalite for one).

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-26s %s\n", c.path, c.summary)
	}
	fmt.Fprintf(&b, "  %-26s %s\n", "version", "print the command's version (also -version)")
	b.WriteString(`
USER is the user item's partition key, as the app's UserKey.PK
(USER#alice); in a table with a sort key, -sk gives its sort key
(-sk PROFILE). Every command takes -table, and -json for output a script
reads. The table records its layout (Config.Layout: keys, prefixes,
attributes, MREC), which the app or 'table create' writes there: every
command acts in it, and the layout flags, which it needs none of, are
overrides that must agree with it.

Run 'ddbsession COMMAND -h' for a command's flags and an example.

` + exitCodesHelp)
	return b.String()
}
