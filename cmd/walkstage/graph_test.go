package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// graph info tells what the CPU engine's tables will add, so a deployment
// can be sized before it starts.
func TestGraphInfoSizesTables(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		gen  []string
		want []string
		not  []string
	}{
		{"weighted, labelled", []string{"--weights", "--labels", "3"},
			[]string{"cpu alias:", "fused (when within WALKSTAGE_CPU_FUSED_TABLE_BYTES", "packed", "cpu node2vec:", "cpu metapath:"}, nil},
		{"plain", nil, []string{"cpu node2vec:"}, []string{"cpu alias:", "cpu metapath:"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".wsg")
			args := append([]string{"graph", "generate", "--scale", "8", "--edge-factor", "4", "--seed", strconv.Itoa(i + 1), "--out", path}, c.gen...)
			var out, errOut bytes.Buffer
			if rc := Main(context.Background(), args, &out, &errOut); rc != 0 {
				t.Fatalf("graph generate: rc %d: %s", rc, errOut.String())
			}
			out.Reset()
			if rc := Main(context.Background(), []string{"graph", "info", path}, &out, &errOut); rc != 0 {
				t.Fatalf("graph info: rc %d: %s", rc, errOut.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("graph info lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range c.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("graph info shows %q for a graph without its table:\n%s", w, out.String())
				}
			}
		})
	}
}
