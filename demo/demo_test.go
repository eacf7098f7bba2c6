package demo

import (
	"bytes"
	"context"
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
