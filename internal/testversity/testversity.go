// Package testversity runs versitygw (github.com/versity/versitygw), a real
// S3 gateway, as a separate process with its POSIX backend, for the tests
// that must meet the S3 protocol as production does: signatures, multipart
// uploads and conditional writes over the wire. It holds nothing else and
// is imported only by tests.
package testversity

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start runs versitygw with the credentials in AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, serving a fresh directory, and returns its
// endpoint ("http://127.0.0.1:port"); the process is killed at the test's
// end. The binary is $VERSITYGW, else versitygw on PATH, else bin/versitygw
// at the repository root (scripts/test.sh installs it there). Without it
// the test skips, unless WALKSTAGE_INTEGRATION=1, when it fails.
func Start(t testing.TB) (endpoint string) {
	t.Helper()
	bin := find()
	if bin == "" {
		if os.Getenv("WALKSTAGE_INTEGRATION") == "1" {
			t.Fatal("versitygw not found ($VERSITYGW, PATH or ./bin) and WALKSTAGE_INTEGRATION=1")
		}
		t.Skip("versitygw not found ($VERSITYGW, PATH or ./bin); scripts/test.sh installs it")
	}
	root := t.TempDir()
	data, meta := filepath.Join(root, "data"), filepath.Join(root, "meta")
	for _, d := range []string{data, meta} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--access", os.Getenv("AWS_ACCESS_KEY_ID"), "--secret", os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"--port", addr, "--quiet", "posix", "--sidecar", meta, data)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("versitygw output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case err := <-exited:
			t.Fatalf("versitygw exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s\n%s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// find locates the binary: $VERSITYGW, PATH, then bin/ of the first
// directory upwards that holds go.mod.
func find() string {
	if bin := os.Getenv("VERSITYGW"); bin != "" {
		return bin
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
