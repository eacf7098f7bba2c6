package main

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
// failure exits 1. TestCLIConformance holds every command in commands() to
// them.

// usageError is a mistake in the command line of command cmd ("graph
// import"): Main prints it as one line and exits 2.
type usageError struct {
	cmd, msg string
}

func (e *usageError) Error() string { return e.msg }

// usageErrorf is a usage error of the command that fs parses.
func usageErrorf(fs *flag.FlagSet, format string, a ...any) error {
	return &usageError{cmd: fs.Name(), msg: fmt.Sprintf(format, a...)}
}

// helpRequest is -h or --help given to fs: Main prints fs's usage on
// stdout. It is flag.ErrHelp to errors.Is.
type helpRequest struct {
	fs *flag.FlagSet
}

func (h *helpRequest) Error() string { return flag.ErrHelp.Error() }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// parseFlags parses args with fs, which must not print anything itself: a
// parse error becomes a usageError naming the flag, -h a helpRequest.
// Positional arguments stay in fs.Args().
func parseFlags(fs *flag.FlagSet, args []string) error {
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
		return &helpRequest{fs: fs}
	}
	return &usageError{cmd: fs.Name(), msg: flagMessage(err)}
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("import IN --out g.wsg"), which flag.Parse alone stops at,
// and returns the positional arguments; errors as parseFlags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
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

// subUsage is a command's help: the usage line (and any text after it),
// then its flags, written to fs.Output() (stdout when -h asked for it).
func subUsage(fs *flag.FlagSet, line string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", strings.TrimRight(line, "\n"))
		printFlags(fs)
	}
}

// aliasUsage begins the usage of a flag's old name: it is accepted and
// sets the same value, but the help does not show it.
const aliasUsage = "old name of --"

// alias registers old as a hidden second name of fs's flag name.
func alias(fs *flag.FlagSet, old, name string) {
	fs.Var(fs.Lookup(name).Value, old, aliasUsage+name)
}

// flagsSet names the flags given on the command line, an old name (alias)
// under its new one.
func flagsSet(fs *flag.FlagSet) map[string]bool {
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

// isHelpArg reports whether a is a request for help.
func isHelpArg(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "help"
}

// dispatch runs command c, reached as path ("graph import"): a group hands
// its arguments to the subcommand they name.
func dispatch(ctx context.Context, path string, c command, args []string, stdout, stderr io.Writer) error {
	if c.subs == nil {
		return c.run(ctx, args, stdout, stderr)
	}
	if len(args) == 0 {
		return &usageError{cmd: path, msg: "missing subcommand"}
	}
	if isHelpArg(args[0]) {
		fmt.Fprint(stdout, c.usage)
		return nil
	}
	sub, ok := c.subs[args[0]]
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			return &usageError{cmd: path, msg: fmt.Sprintf("unknown flag %s: the subcommand comes first", args[0])}
		}
		return &usageError{cmd: path, msg: fmt.Sprintf("unknown subcommand %q", args[0])}
	}
	return dispatch(ctx, path+" "+args[0], sub, args[1:], stdout, stderr)
}

// printJSON writes v as the one JSON line a --json result is, for scripts.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// resultFlags are --quiet and --json, which every command that has a
// result takes (TestJSONResultLines holds them to it): --json replaces the
// result a reader gets on stdout with one JSON line for scripts, whose keys
// are the request and event fields' (docs/reference/vocabulary.md);
// --quiet prints nothing but errors, and with --json that line.
type resultFlags struct {
	quiet, json bool
}

func (r *resultFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.quiet, "quiet", false, "print nothing but errors (with --json, the result line)")
	fs.BoolVar(&r.json, "json", false, "print the result as one JSON line on stdout (docs/reference/vocabulary.md)")
}

// writers are where the command writes its result for a reader (out:
// stdout unless --json or --quiet) and its notes, warnings and progress
// (notes: stderr unless --quiet). Errors go back to Main, which prints
// them whatever the flags.
func (r resultFlags) writers(stdout, stderr io.Writer) (out, notes io.Writer) {
	out, notes = stdout, stderr
	if r.json || r.quiet {
		out = io.Discard
	}
	if r.quiet {
		notes = io.Discard
	}
	return out, notes
}

// print writes v as the result line when --json asked for one.
func (r resultFlags) print(stdout io.Writer, v any) error {
	if !r.json {
		return nil
	}
	return printJSON(stdout, v)
}

// graphResult is the --json line of graph generate and graph import; the
// keys are those of graph info and of the request and event fields
// (docs/reference/vocabulary.md).
type graphResult struct {
	Graph            string  `json:"graph,omitempty"`
	Version          string  `json:"graph_version"`
	Vertices         int     `json:"vertices"`
	Edges            int64   `json:"edges"`
	Weighted         bool    `json:"weighted"`
	Labelled         bool    `json:"labelled"`
	Out              string  `json:"out"`
	Bytes            int64   `json:"bytes"`
	DurationSeconds  float64 `json:"duration_seconds"`
	Input            string  `json:"input,omitempty"`
	InputEdges       int64   `json:"input_edges,omitempty"`
	SelfLoopsDropped int64   `json:"self_loops_dropped,omitempty"`
	Duplicates       int64   `json:"duplicates,omitempty"`
	DuplicatePolicy  string  `json:"duplicate_policy,omitempty"`
	IDType           string  `json:"id_type,omitempty"`
	Timed            bool    `json:"timed,omitempty"`
}
