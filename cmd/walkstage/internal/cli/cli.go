package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// The conventions every subcommand follows, as other command-line tools
// do: -h and --help print the usage on stdout and exit 0; a mistake in the
// command line (an unknown flag, a bad value, a missing or extra argument)
// exits 2 with one line on stderr naming it and pointing to -h; any other
// failure exits 1. TestCLIConformance (package main) holds every command
// of walkstage's table to them.

// UsageError is a mistake in the command line of command cmd ("graph
// import"): Main prints it as one line and exits 2.
type UsageError struct {
	Cmd, Msg string
}

func (e *UsageError) Error() string { return e.Msg }

// UsageErrorf is a usage error of the command that fs parses.
func UsageErrorf(fs *flag.FlagSet, format string, a ...any) error {
	return &UsageError{Cmd: fs.Name(), Msg: fmt.Sprintf(format, a...)}
}

// HelpRequest is -h or --help given to fs: Main prints fs's usage on
// stdout. It is flag.ErrHelp to errors.Is.
type HelpRequest struct {
	FS *flag.FlagSet
}

func (h *HelpRequest) Error() string { return flag.ErrHelp.Error() }
func (h *HelpRequest) Unwrap() error { return flag.ErrHelp }

// ParseFlags parses args with fs, which must not print anything itself: a
// parse error becomes a UsageError naming the flag, -h a HelpRequest.
// Positional arguments stay in fs.Args().
func ParseFlags(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	// flag prints the error and the whole usage on a parse error; the
	// caller's one line replaces both.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &HelpRequest{FS: fs}
	}
	return &UsageError{Cmd: fs.Name(), Msg: flagMessage(err)}
}

// ParseInterleaved parses flags that may come before or after positional
// arguments ("import IN --out g.wsg"), which flag.Parse alone stops at,
// and returns the positional arguments; errors as ParseFlags.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := ParseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// flagMessage rewords the flag package's errors with the -- spelling the
// help and the docs use.
func flagMessage(err error) string {
	msg := err.Error()
	for _, r := range []struct{ from, to, tail string }{
		{"flag provided but not defined: -", "unknown flag --", ""},
		{"flag needs an argument: -", "flag --", " needs a value"},
	} {
		if name, ok := strings.CutPrefix(msg, r.from); ok {
			return r.to + strings.TrimPrefix(name, "-") + r.tail
		}
	}
	// "invalid value "x" for flag -n: ...", "invalid boolean value "x" for -v: ..."
	if strings.Contains(msg, "for flag -") {
		return strings.Replace(msg, "for flag -", "for --", 1)
	}
	return strings.Replace(msg, "for -", "for --", 1)
}

// SubUsage is a command's help: the usage line (and any text after it),
// then its flags, written to fs.Output() (stdout when -h asked for it).
func SubUsage(fs *flag.FlagSet, line string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", strings.TrimRight(line, "\n"))
		printFlags(fs)
	}
}

// aliasUsage begins the usage of a flag's old name: it is accepted and
// sets the same value, but the help does not show it.
const aliasUsage = "old name of --"

// Alias registers old as a hidden second name of fs's flag name.
func Alias(fs *flag.FlagSet, old, name string) {
	fs.Var(fs.Lookup(name).Value, old, aliasUsage+name)
}

// FlagsSet names the flags given on the command line, an old name (alias)
// under its new one.
func FlagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if name, ok := strings.CutPrefix(f.Usage, aliasUsage); ok {
			set[name] = true
			return
		}
		set[f.Name] = true
	})
	return set
}

// printFlags lists fs's flags as PrintDefaults does, spelled with -- as in
// the docs, without the old names.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, aliasUsage) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n        " + strings.ReplaceAll(usage, "\n", "\n        ")
		if !isZeroDefault(f) {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					line += fmt.Sprintf(" (default %q)", f.DefValue)
				} else {
					line += fmt.Sprintf(" (default %s)", f.DefValue)
				}
			} else {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
}

// isZeroDefault reports whether f's default is its type's zero value,
// which the help leaves unsaid (as flag.PrintDefaults does).
func isZeroDefault(f *flag.Flag) (zero bool) {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return false
	}
	defer func() { recover() }() // a Value whose String needs fields set
	return f.DefValue == v.String()
}

// IsHelpArg reports whether a is a request for help.
func IsHelpArg(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "help"
}

// Dispatch runs command c, reached as path ("graph import"): a group hands
// its arguments to the subcommand they name.
func Dispatch(ctx context.Context, path string, c Command, args []string, stdout, stderr io.Writer) error {
	if c.Subs == nil {
		return c.Run(ctx, args, stdout, stderr)
	}
	if len(args) == 0 {
		return &UsageError{Cmd: path, Msg: "missing subcommand"}
	}
	if IsHelpArg(args[0]) {
		fmt.Fprint(stdout, c.Usage)
		return nil
	}
	sub, ok := c.Subs[args[0]]
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			return &UsageError{Cmd: path, Msg: fmt.Sprintf("unknown flag %s: the subcommand comes first", args[0])}
		}
		return &UsageError{Cmd: path, Msg: fmt.Sprintf("unknown subcommand %q", args[0])}
	}
	return Dispatch(ctx, path+" "+args[0], sub, args[1:], stdout, stderr)
}

// PrintJSON writes v as the one JSON line a --json result is, for scripts.
func PrintJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// ResultFlags are --quiet and --json, which every command that has a
// result takes (TestJSONResultLines holds them to it): --json replaces the
// result a reader gets on stdout with one JSON line for scripts, whose keys
// are the request and event fields' (docs/reference/vocabulary.md);
// --quiet prints nothing but errors, and with --json that line.
type ResultFlags struct {
	Quiet, JSON bool
}

// Register adds --quiet and --json to fs.
func (r *ResultFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&r.Quiet, "quiet", false, "print nothing but errors (with --json, the result line)")
	fs.BoolVar(&r.JSON, "json", false, "print the result as one JSON line on stdout (docs/reference/vocabulary.md)")
}

// Writers are where the command writes its result for a reader (out:
// stdout unless --json or --quiet) and its notes, warnings and progress
// (notes: stderr unless --quiet). Errors go back to Main, which prints
// them whatever the flags.
func (r ResultFlags) Writers(stdout, stderr io.Writer) (out, notes io.Writer) {
	out, notes = stdout, stderr
	if r.JSON || r.Quiet {
		out = io.Discard
	}
	if r.Quiet {
		notes = io.Discard
	}
	return out, notes
}

// Print writes v as the result line when --json asked for one.
func (r ResultFlags) Print(stdout io.Writer, v any) error {
	if !r.JSON {
		return nil
	}
	return PrintJSON(stdout, v)
}
