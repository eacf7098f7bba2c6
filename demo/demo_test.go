package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoRunsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	var out bytes.Buffer
	err := Run(context.Background(), Options{Dir: t.TempDir(), Scale: 10, Engine: "cpu"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"demo-deepwalk   succeeded", "demo-metapath   succeeded", "demo-malformed  rejected",
		"/part-00000-", "_SUCCESS", "header walkstage-error"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// A second run in the same folder says that it reuses the first one's
// output; --fresh (Options.Fresh) removes it and walks again.
func TestDemoRerunSaysItReuses(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	dir := t.TempDir()
	run := func(fresh bool) string {
		var out bytes.Buffer
		if err := Run(context.Background(), Options{Dir: dir, Scale: 6, Engine: "cpu", Fresh: fresh}, &out); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return out.String()
	}
	if out := run(false); strings.Contains(out, "reusing") || strings.Contains(out, "fresh ") {
		t.Errorf("first run:\n%s", out)
	}
	stale := filepath.Join(dir, outputPrefix, "left-by-the-first-run")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(false); !strings.Contains(out, "reusing    "+filepath.Join(dir, outputPrefix)+" holds an earlier run's output") {
		t.Errorf("second run does not say it reuses:\n%s", out)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("the second run removed the output without --fresh: %v", err)
	}
	if out := run(true); strings.Contains(out, "reusing") || !strings.Contains(out, "fresh      removed") {
		t.Errorf("--fresh run:\n%s", out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("--fresh left the earlier output: %v", err)
	}
}
