package graphcmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// publish, list and prune against a file:// catalog, and -h exits 0.
func TestGraphCatalogCommands(t *testing.T) {
	dir := t.TempDir()
	cat := "file://" + filepath.Join(dir, "catalog")
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if rc := walkstage(context.Background(), args, &out, &errOut); rc != 0 {
			t.Fatalf("%v: rc %d: %s", args, rc, errOut.String())
		}
		return out.String()
	}
	var versions []string
	for seed := 1; seed <= 3; seed++ {
		g := filepath.Join(dir, strconv.Itoa(seed)+".wsg")
		run("graph", "generate", "--scale", "6", "--edge-factor", "4", "--seed", strconv.Itoa(seed), "--out", g)
		out := run("graph", "publish", g, "--to", cat)
		f := strings.Fields(out)
		if len(f) < 4 || f[0] != "published" {
			t.Fatalf("publish said %q", out)
		}
		versions = append(versions, f[3])
	}
	list := run("graph", "list", "--from", cat)
	if !strings.Contains(list, "*  "+versions[2]) || strings.Count(list, "\n") != 4 {
		t.Fatalf("list:\n%s", list)
	}
	out := run("graph", "prune", "--from", cat, "--keep", "2")
	if !strings.Contains(out, "removed "+versions[0]) || !strings.Contains(out, "1 versions removed") {
		t.Fatalf("prune:\n%s", out)
	}
	for _, sub := range []string{"publish", "list", "prune"} {
		run("graph", sub, "-h")
	}
	var out2, errOut bytes.Buffer
	if rc := walkstage(context.Background(), []string{"graph", "publish", filepath.Join(dir, "missing.wsg"), "--to", cat}, &out2, &errOut); rc == 0 {
		t.Fatal("published a missing file")
	}
}
