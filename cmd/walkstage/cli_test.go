package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
)

// asCLI makes the test binary the walkstage command when set: the
// conformance tests run it as a process, as a user or a script does, so
// exit codes and the split between stdout and stderr are the real ones.
const asCLI = "WALKSTAGE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cliResult is one run of the command.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs walkstage args in a process of its own, in an empty
// directory with no WALKSTAGE_* variables: this test binary, or the binary
// WALKSTAGE_TEST_CLI_BINARY names.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv is runCLI with the variables env ("K=V") added.
func runCLIEnv(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := os.Args[0]
	if b := os.Getenv("WALKSTAGE_TEST_CLI_BINARY"); b != "" {
		bin = b // another build of walkstage, e.g. an earlier one
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WALKSTAGE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, env...), asCLI+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("walkstage %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// oneDashFlag is a flag listed as Go's flag package lists it.
var oneDashFlag = regexp.MustCompile(`(?m)^  -[A-Za-z]`)

// commandPaths lists every command and subcommand in the command table,
// groups too ("graph", "graph import"), so a command added to the table is
// held to the conventions without this test knowing its name.
func commandPaths(prefix []string, cmds map[string]cli.Command) [][]string {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var out [][]string
	for _, n := range names {
		p := append(prefix[:len(prefix):len(prefix)], n)
		out = append(out, p)
		if c := cmds[n]; c.Subs != nil {
			out = append(out, commandPaths(p, c.Subs)...)
		}
	}
	return out
}

// TestCLIConformance: for every command and subcommand, -h and --help
// print its usage on stdout (nothing on stderr) and exit 0, and an unknown
// flag exits 2 with one line on stderr that names the flag and points to
// the command's -h.
func TestCLIConformance(t *testing.T) {
	paths := commandPaths(nil, commands())
	if len(paths) < 15 {
		t.Fatalf("found only %d commands in the table: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, h := range []string{"-h", "--help"} {
				r := runCLI(t, append(p, h)...)
				if r.code != 0 {
					t.Errorf("%s %s: exit %d, want 0\nstderr: %s", name, h, r.code, r.stderr)
				}
				if !strings.HasPrefix(r.stdout, "usage: walkstage "+name) {
					t.Errorf("%s %s: stdout does not start with %q:\n%s", name, h, "usage: walkstage "+name, r.stdout)
				}
				if r.stderr != "" {
					t.Errorf("%s %s: wrote to stderr:\n%s", name, h, r.stderr)
				}
				if strings.Contains(r.stdout, "Usage of") {
					t.Errorf("%s %s: Go's raw flag usage:\n%s", name, h, r.stdout)
				}
				if oneDashFlag.MatchString(r.stdout) {
					t.Errorf("%s %s: a flag listed with one dash:\n%s", name, h, r.stdout)
				}
			}
			r := runCLI(t, append(p, "--no-such-flag")...)
			if r.code != 2 {
				t.Errorf("%s --no-such-flag: exit %d, want 2\nstderr: %s", name, r.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("%s --no-such-flag: wrote to stdout:\n%s", name, r.stdout)
			}
			want := "walkstage " + name + ": unknown flag --no-such-flag"
			hint := "(see walkstage " + name + " -h)\n"
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, want) || !strings.HasSuffix(r.stderr, hint) {
				t.Errorf("%s --no-such-flag: stderr is not one line %q ... %q:\n%s", name, want, hint, r.stderr)
			}
		})
	}
}

// TestCLIUsageErrors: a bad value, a missing or an extra argument exits 2
// with one line naming it; a failure that is not the command line's exits 1.
func TestCLIUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string // in the one line on stderr
	}{
		{nil, 2, "walkstage: missing command (see walkstage -h)"},
		{[]string{"nope"}, 2, `walkstage: unknown command "nope"`},
		{[]string{"--nope"}, 2, "walkstage: unknown flag --nope"},
		{[]string{"graph"}, 2, "walkstage graph: missing subcommand (see walkstage graph -h)"},
		{[]string{"graph", "nope"}, 2, `walkstage graph: unknown subcommand "nope"`},
		{[]string{"walk"}, 2, "walkstage walk: --graph is required (see walkstage walk -h)"},
		{[]string{"walk", "--length", "ten", "--graph", "g.wsg"}, 2, `walkstage walk: invalid value "ten" for --length`},
		{[]string{"walk", "--graph"}, 2, "walkstage walk: flag --graph needs a value"},
		{[]string{"walk", "--graph", "g.wsg", "extra"}, 2, `walkstage walk: unexpected argument "extra"`},
		{[]string{"walk", "--graph", "g.wsg", "--walks-per-seed", "0"}, 2, "walkstage walk: --walks-per-seed 0: want at least 1"},
		{[]string{"walk", "--graph", "missing.wsg"}, 1, "walkstage walk: "},
		{[]string{"graph", "import", "--out", "g.wsg"}, 2, "walkstage graph import: want exactly one input file"},
		{[]string{"graph", "generate", "--scale", "4"}, 2, "walkstage graph generate: --out is required"},
		{[]string{"graph", "info", "a.wsg", "b.wsg"}, 2, "walkstage graph info: want exactly one graph file, got 2"},
		{[]string{"graph", "list"}, 2, "walkstage graph list: --from is required"},
		{[]string{"graph", "prune", "--from", "file:///nowhere"}, 2, "walkstage graph prune: --from and --keep N"},
		{[]string{"gpu-probe", "extra"}, 2, `walkstage gpu-probe: takes no arguments, got "extra"`},
		{[]string{"run", "extra"}, 2, `walkstage run: unexpected argument "extra"`},
		{[]string{"demo", "--scale", "40"}, 2, "walkstage demo: --scale 40 out of range"},
		{[]string{"load"}, 2, "walkstage load: --graph or --vertices is required"},
		{[]string{"version", "extra"}, 2, `walkstage version: unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, c.code, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr is not one line with %q:\n%s", c.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("wrote to stdout:\n%s", r.stdout)
			}
		})
	}
}

// The old flag names (before the request's words, docs/reference/
// vocabulary.md) are still accepted and set the same values, but the help
// no longer shows them.
func TestOldFlagNamesStillWork(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.wsg")
	if r := runCLI(t, "graph", "generate", "--scale", "6", "--weights", "--out", g, "--json"); r.code != 0 ||
		!strings.Contains(r.stdout, `"weighted":true`) {
		t.Fatalf("graph generate --weights: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The same walks under either spelling: the manifest lists the same
	// parts with the same rows, and the event fields match.
	walkJSON := func(batch string, flags ...string) string {
		args := append([]string{"walk", "--graph", g, "--out", "file://" + filepath.Join(dir, "out"), "--algorithm", "ppr",
			"--batch-id", batch, "--json", "--quiet"}, flags...)
		r := runCLI(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("walk %v: exit %d\n%s%s", flags, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	oldOut := walkJSON("old", "--walks-per-vertex", "3", "--stop", "0.3", "--seed", "7")
	newOut := walkJSON("new", "--walks-per-seed", "3", "--stop-probability", "0.3", "--rng-seed", "7")
	for _, w := range []string{`"rng_seed":"7"`, `"walks":192`} {
		if !strings.Contains(oldOut, w) || !strings.Contains(newOut, w) {
			t.Errorf("want %s in both:\nold: %snew: %s", w, oldOut, newOut)
		}
	}
	stepsOf := func(s string) string { return s[strings.Index(s, `"steps":`):strings.Index(s, `,"bytes"`)] }
	if stepsOf(oldOut) != stepsOf(newOut) {
		t.Errorf("old and new names walked differently:\nold: %snew: %s", oldOut, newOut)
	}
	// The other commands' old names parse: the run stops at the usage
	// error that comes after the flags, not at an unknown flag.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"load", "--walks", "3", "--restart", "0.2", "--rng-seed", "5"}, "--graph or --vertices is required"},
		{[]string{"bench", "--walks-per-vertex", "2", "extra"}, `unexpected argument "extra"`},
	} {
		if r := runCLI(t, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
	for _, h := range []struct {
		args      []string
		old, new_ string
	}{
		{[]string{"walk", "-h"}, "--walks-per-vertex", "--walks-per-seed"},
		{[]string{"walk", "-h"}, "--stop ", "--stop-probability"},
		{[]string{"walk", "-h"}, "--seed ", "--rng-seed"},
		{[]string{"graph", "generate", "-h"}, "--weights", "--weighted"},
		{[]string{"bench", "-h"}, "--walks-per-vertex", "--walks-per-seed"},
		{[]string{"load", "-h"}, "--restart", "--stop-probability"},
		{[]string{"load", "-h"}, "--walks ", "--walks-per-seed"},
		{[]string{"load", "-h"}, "--rng-seed", "--draw-seed"},
	} {
		r := runCLI(t, h.args...)
		if strings.Contains(r.stdout, h.old) || !strings.Contains(r.stdout, h.new_) {
			t.Errorf("%v shows %q or lacks %q", h.args, h.old, h.new_)
		}
	}
}

// --quiet prints nothing but errors; with --json, the one result line.
func TestQuietAndJSON(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.wsg")
	if r := runCLI(t, "graph", "generate", "--scale", "6", "--out", g, "--quiet"); r.code != 0 || r.stdout+r.stderr != "" {
		t.Fatalf("graph generate --quiet: exit %d, printed:\n%s%s", r.code, r.stdout, r.stderr)
	}
	out := "file://" + filepath.Join(dir, "out")
	// --quiet wins over the stage's log level.
	r := runCLIEnv(t, []string{"WALKSTAGE_LOG_LEVEL=debug"}, "walk", "--graph", g, "--out", out, "--quiet")
	if r.code != 0 || r.stdout+r.stderr != "" {
		t.Errorf("walk --quiet: exit %d, printed:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "walk", "--graph", g, "--out", out, "--batch-id", "j", "--json", "--quiet")
	if r.code != 0 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 ||
		!strings.HasPrefix(r.stdout, `{"status":"succeeded","batch_id":"j","output":"walks"`) || !strings.Contains(r.stdout, `"manifest":"file://`) {
		t.Errorf("walk --json --quiet: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// A failure under --quiet is still said.
	r = runCLI(t, "walk", "--graph", filepath.Join(dir, "missing.wsg"), "--out", out, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "missing.wsg") {
		t.Errorf("walk --quiet on a missing graph: exit %d, stderr %q", r.code, r.stderr)
	}
}

// noResult are the commands without a result line, and why: every other
// command takes --json and --quiet.
var noResult = map[string]string{
	"run":  "a service: it runs until stopped, its output is logs, metrics and events",
	"demo": "a tour for a person: its events and files are what it shows; the stage's events are the scripts' results",
}

// TestJSONResultLines: every command with a result takes --json and
// --quiet; with both it prints exactly one line on stdout, a JSON object
// with the command's key fields, and nothing on stderr; with --quiet
// alone it prints nothing at all. The commands run in order on one
// directory, each on what the ones before made (graph, catalog, output).
func TestJSONResultLines(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "g.wsg")
	cat := "file://" + filepath.Join(dir, "catalog")
	out := "file://" + filepath.Join(dir, "out")
	cases := []struct {
		cmd  string   // the command's path, as in the help
		args []string // after the path, before --json --quiet
		keys []string // in the line
	}{
		{"version", nil, []string{"version"}},
		{"graph generate", []string{"--scale", "6", "--labels", "3", "--weighted", "--out", g}, []string{"graph", "graph_version", "vertices", "edges"}},
		{"graph import", []string{filepath.Join(dir, "e.txt"), "--weighted", "--out", filepath.Join(dir, "i.wsg")}, []string{"graph_version", "input_edges"}},
		{"graph info", []string{g}, []string{"graph_version", "max_degree"}},
		{"graph export", []string{g, "--out", filepath.Join(dir, "e2.txt")}, []string{"graph_version", "edges", "import_flags", "exact"}},
		{"graph publish", []string{g, "--to", cat}, []string{"graph_version", "sha256", "current"}},
		{"graph list", []string{"--from", cat}, []string{"catalog", "versions"}},
		{"graph prune", []string{"--from", cat, "--keep", "1"}, []string{"removed", "complete"}},
		{"walk", []string{"--graph", g, "--out", out, "--batch-id", "j"}, []string{"status", "batch_id", "objects", "manifest"}},
		{"output ls", []string{out, "--kind", "walks"}, []string{"batches", "objects"}},
		{"output tidy", []string{out, "--older-than", "1h"}, []string{"removed", "complete"}},
		{"bench", []string{"--scale", "5", "--length", "5", "--algorithms", "deepwalk,metapath,neighbor,visits",
			"--visits-queries", "3", "--visits-steps", "50", "--sample-seeds", "3"}, []string{"graph", "engine", "cases"}},
		{"load", []string{"--plain-upload", "--bucket", "file://" + filepath.Join(dir, "plain"), "--plain-bytes", "1000",
			"--plain-object-bytes", "400", "--plain-parallel", "2"}, []string{"mode", "objects", "bytes", "duration_seconds"}},
		{"gpu-probe", nil, []string{"device", "usable"}},
	}
	// Every command with --json in its help has a case here, and every
	// command but those in noResult has --json.
	tested := map[string]bool{}
	for _, c := range cases {
		tested[c.cmd] = true
	}
	for _, p := range commandPaths(nil, commands()) {
		name := strings.Join(p, " ")
		r := runCLI(t, append(p, "-h")...)
		hasJSON := strings.Contains(r.stdout, "\n  --json\n")
		hasQuiet := strings.Contains(r.stdout, "\n  --quiet\n")
		group := strings.HasPrefix(r.stdout, "usage: walkstage "+name+" <subcommand>")
		switch why, exempt := noResult[name]; {
		case group || exempt:
			if hasJSON {
				t.Errorf("%s has --json but is listed as having no result (%s)", name, why)
			}
		case !hasJSON || !hasQuiet:
			t.Errorf("%s: --json %v, --quiet %v in its help; want both (or a reason in noResult)", name, hasJSON, hasQuiet)
		case !tested[name]:
			t.Errorf("%s has --json but no case in this test", name)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "e.txt"), []byte("1 2 0.5\n2 3 1.5\n3 1 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		args := append(strings.Fields(c.cmd), c.args...)
		r := runCLI(t, append(args, "--json", "--quiet")...)
		if c.cmd == "gpu-probe" && r.code == 1 && r.stdout == "" && strings.Count(r.stderr, "\n") == 1 {
			continue // no usable GPU here: an error, and no result line
		}
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%s --json --quiet: exit %d\nstderr: %s", c.cmd, r.code, r.stderr)
			continue
		}
		var obj map[string]any
		if strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") || json.Unmarshal([]byte(r.stdout), &obj) != nil {
			t.Errorf("%s --json --quiet: stdout is not one line of a JSON object:\n%s", c.cmd, r.stdout)
			continue
		}
		for _, k := range c.keys {
			if _, ok := obj[k]; !ok {
				t.Errorf("%s --json: no %q in %s", c.cmd, k, r.stdout)
			}
		}
		if c.cmd == "graph generate" || c.cmd == "walk" {
			continue // run again, the same output: a second run refuses or rewrites
		}
		if r := runCLI(t, append(args, "--quiet")...); r.code != 0 || r.stdout+r.stderr != "" {
			t.Errorf("%s --quiet: exit %d, printed:\n%s%s", c.cmd, r.code, r.stdout, r.stderr)
		}
	}
}
