package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one subcommand: Run gets the arguments after its name. A
// group of subcommands ("graph import") has Subs and its help in Usage
// instead of Run.
type Command struct {
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	Usage   string
	Subs    map[string]Command
}

// Main runs the command line args with the table cmds and returns the
// process exit code: 0, 1 for a failure, 2 for a mistake in the command
// line (cli.go).
func Main(ctx context.Context, cmds map[string]Command, args []string, stdout, stderr io.Writer) int {
	if len(args) >= 2 && args[0] == "help" {
		// "walkstage help run" is "walkstage run -h"; "help graph import"
		// is "graph import -h".
		args = append(args[1:len(args):len(args)], "-h")
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "walkstage: missing command (see walkstage -h)")
		return 2
	}
	if IsHelpArg(args[0]) {
		usage(stdout, cmds)
		return 0
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	c, ok := cmds[args[0]]
	if !ok {
		what := fmt.Sprintf("command %q", args[0])
		if strings.HasPrefix(args[0], "-") {
			what = "flag " + args[0] + ": the command comes first"
		}
		fmt.Fprintf(stderr, "walkstage: unknown %s (see walkstage -h)\n", what)
		return 2
	}
	err := Dispatch(ctx, args[0], c, args[1:], stdout, stderr)
	var help *HelpRequest
	var bad *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		help.FS.SetOutput(stdout)
		help.FS.Usage()
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // printed by the command itself
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "walkstage %s: %s (see walkstage %s -h)\n", bad.Cmd, bad.Msg, bad.Cmd)
		return 2
	}
	fmt.Fprintf(stderr, "walkstage %s: %v\n", args[0], err)
	return 1
}

func usage(w io.Writer, cmds map[string]Command) {
	fmt.Fprintln(w, "usage: walkstage <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].Summary)
	}
	fmt.Fprintln(w, "\nRun 'walkstage <command> -h' or 'walkstage help <command>' for a command's flags.")
}
