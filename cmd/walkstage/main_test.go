package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Help is uniform: every command and subcommand answers -h, --help and
// "walkstage help <command>" with its usage on stdout and exit code 0,
// never "flag: help requested" (TestCLIConformance checks the same of
// every command in the table, as a process).
func TestHelpExitsZeroOnEveryCommand(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in the output
	}{
		{[]string{"-h"}, []string{"usage: walkstage <command>", "walkstage help <command>"}},
		{[]string{"--help"}, []string{"usage: walkstage <command>"}},
		{[]string{"help"}, []string{"usage: walkstage <command>"}},
		{[]string{"graph", "-h"}, []string{"usage: walkstage graph <subcommand>", "export"}},
		{[]string{"graph", "generate", "-h"}, []string{"usage: walkstage graph generate", "-scale"}},
		{[]string{"graph", "import", "--help"}, []string{"usage: walkstage graph import", "-duplicates"}},
		{[]string{"graph", "info", "-h"}, []string{"usage: walkstage graph info", "-verify"}},
		{[]string{"graph", "export", "-h"}, []string{"usage: walkstage graph export", "-format", "same version"}},
		{[]string{"bench", "-h"}, []string{"usage: walkstage bench", "-algorithms"}},
		{[]string{"run", "-h"}, []string{"usage: walkstage run",
			"  WALKSTAGE_BROKERS  (no default)\n      comma-separated bootstrap brokers",
			"  WALKSTAGE_MAX_IN_FLIGHT  default 64\n", "GOMEMLIMIT"}},
		{[]string{"walk", "-h"}, []string{"usage: walkstage walk", "seed k's", "k*W .. (k+1)*W-1", "--walks-per-seed", "kind={kind}", "part-NNNNN-{attempt}.parquet", "DuckDB cannot read it"}},
		{[]string{"demo", "-h"}, []string{"usage: walkstage demo", "[--timeout 2m]", "-timeout"}},
		{[]string{"load", "-h"}, []string{"usage: walkstage load", "-plain-upload", "-steps-per-query", "RESULT k=v"}},
		{[]string{"output", "-h"}, []string{"usage: walkstage output <subcommand>", "ls", "tidy"}},
		{[]string{"output", "ls", "-h"}, []string{"usage: walkstage output ls", "-kind", "-format", "read_parquet"}},
		{[]string{"output", "tidy", "--help"}, []string{"usage: walkstage output tidy", "-older-than", "longest attempt", "RESULT k=v"}},
		{[]string{"help", "output", "tidy"}, []string{"usage: walkstage output tidy"}},
		{[]string{"run", "--help"}, []string{"--cpuprofile FILE"}},
		{[]string{"run", "-h"}, []string{"kind=<kind>/graph=<graph>/algorithm=<algorithm>/batch=<B>/"}},
		{[]string{"help", "run"}, []string{"usage: walkstage run", "WALKSTAGE_BROKERS"}},
		{[]string{"help", "graph", "import"}, []string{"usage: walkstage graph import"}},
		{[]string{"help", "demo"}, []string{"usage: walkstage demo"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			rc := Main(context.Background(), c.args, &out, &errb)
			got := out.String() + errb.String()
			if rc != 0 {
				t.Errorf("exit code %d, want 0:\n%s", rc, got)
			}
			if strings.Contains(got, "help requested") {
				t.Errorf("output says %q:\n%s", "flag: help requested", got)
			}
			if strings.Contains(got, "stage/config") {
				t.Errorf("help points to a source file the image lacks:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// "walkstage help run" is "walkstage run -h", byte for byte.
func TestHelpCommandMatchesDashH(t *testing.T) {
	for _, cmd := range [][]string{{"run"}, {"walk"}, {"bench"}, {"graph", "export"}} {
		var a, b bytes.Buffer
		Main(context.Background(), append([]string{"help"}, cmd...), &a, &a)
		Main(context.Background(), append(cmd, "-h"), &b, &b)
		if a.String() != b.String() || a.Len() == 0 {
			t.Errorf("help %v differs from %v -h", cmd, cmd)
		}
	}
}

// Errors still fail: only help exits 0.
func TestUsageErrorsExitNonZero(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"help", "nope"}, {"graph"}, {"graph", "info", "--bogus"}, {"bench", "--bogus"}, {"walk"},
		{"load"}, {"load", "--plain-upload"}, {"load", "--vertices", "10", "--output", "rows", "--brokers", "127.0.0.1:1"}} {
		var out bytes.Buffer
		if rc := Main(context.Background(), args, &out, &out); rc == 0 {
			t.Errorf("%v: exit code 0:\n%s", args, out.String())
		}
	}
}

// scripts/demo.sh -h prints the demo's help, --timeout included, without
// Go and without building (PATH here has no go, so a build would fail).
func TestDemoScriptHelpDoesNotBuild(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	root, _ := filepath.Abs("../..")
	// A PATH with cat and nothing else: no go, no curl, no tar.
	bin := t.TempDir()
	if cat, err := exec.LookPath("cat"); err == nil {
		os.Symlink(cat, filepath.Join(bin, "cat"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, flag := range []string{"-h", "--help"} {
		cmd := exec.CommandContext(ctx, bash, filepath.Join(root, "scripts", "demo.sh"), flag)
		cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("demo.sh %s: %v\n%s", flag, err, out)
		}
		for _, w := range []string{"usage: scripts/demo.sh", "--timeout", "--scale"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("demo.sh %s lacks %q:\n%s", flag, w, out)
			}
		}
	}
}
