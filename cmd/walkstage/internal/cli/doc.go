// Package cli is the plumbing every walkstage subcommand shares: Command,
// the command table's entry, and Main, which runs a table by the house
// conventions (-h on stdout and exit 0, a mistake in the command line as
// one line on stderr and exit 2, any other failure exit 1); flag parsing
// that keeps to them (ParseFlags, SubUsage, old flag names as hidden
// aliases); --quiet and --json (ResultFlags); the plain log handler the
// one-shot commands show the engine's messages with; CPU profiles and
// execution traces of a run.
//
// It knows no subcommand: package main holds walkstage's table, and each
// family of commands (internal/graphcmd, walkcmd, benchcmd, outputcmd) its
// own flags and work.
package cli
