// Package testversity runs versitygw (github.com/versity/versitygw), a real
// S3 gateway, as a separate process with its POSIX backend, for the tests
// that must meet the S3 protocol as production does: signatures, multipart
// uploads and conditional writes over the wire. It holds nothing else and
// is imported only by tests.
package testversity

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/internal/testtool"
)

// Start runs versitygw with the credentials in AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, serving a fresh directory, and returns its
// endpoint ("http://127.0.0.1:port"); the process is killed at the test's
// end. The binary is $VERSITYGW, else versitygw on PATH, else bin/versitygw
// at the repository root (scripts/test.sh installs it there). Without it
// the test skips, unless WALKSTAGE_INTEGRATION=1, when it fails.
func Start(t testing.TB) (endpoint string) {
	t.Helper()
	endpoint, _, _ = Dirs(t)
	return endpoint
}

// Dirs is Start, also returning the directories the gateway serves, for
// tests that make a state only a crash leaves: data holds the objects
// (data/<bucket>/<key>), meta their sidecar metadata
// (meta/<bucket>/<key>/meta/<attribute>).
func Dirs(t testing.TB) (endpoint, data, meta string) {
	t.Helper()
	bin := testtool.Find("VERSITYGW", "versitygw")
	if bin == "" {
		if os.Getenv("WALKSTAGE_INTEGRATION") == "1" {
			t.Fatal("versitygw not found ($VERSITYGW, PATH or ./bin) and WALKSTAGE_INTEGRATION=1")
		}
		t.Skip("versitygw not found ($VERSITYGW, PATH or ./bin); scripts/test.sh installs it")
	}
	root := t.TempDir()
	data, meta = filepath.Join(root, "data"), filepath.Join(root, "meta")
	for _, d := range []string{data, meta} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The port is picked free and released before versitygw binds it, so
	// another process (often a parallel test's versitygw) can take it in
	// between: ours then exits, and a bare dial would reach the other one.
	// Readiness is therefore our process's own listening socket, and a lost
	// port means a new one.
	const tries = 5
	for try := 1; ; try++ {
		endpoint, lost := launch(t, bin, data, meta)
		if !lost {
			return endpoint, data, meta
		}
		if try == tries {
			t.Fatalf("versitygw lost its port to another process %d times", tries)
		}
	}
}

// launch starts versitygw on a free port and waits until it listens there;
// lost is true when it exited because another process had bound the port.
func launch(t testing.TB, bin, data, meta string) (endpoint string, lost bool) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	// Read only once the process has exited: Wait returns after the
	// output's last write (one goroutine writes, as Stdout is Stderr).
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--access", os.Getenv("AWS_ACCESS_KEY_ID"), "--secret", os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"--port", addr.String(), "--quiet", "posix", "--sidecar", meta, data)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			if strings.Contains(logs.String(), "address already in use") {
				return "", true
			}
			t.Fatalf("versitygw exited: %v\n%s", err, logs.String())
		default:
		}
		ok, err := Listening(cmd.Process.Pid, addr.Port)
		if err != nil {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("versitygw on %s: %v", addr, err)
		}
		if ok {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("versitygw output:\n%s", logs.String())
				}
			})
			return "http://" + addr.String(), false
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("versitygw did not listen on %s\n%s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Listening says whether process pid holds a TCP socket listening on
// port (IPv4): a LISTEN entry of /proc/net/tcp whose socket inode is one
// of the process's descriptors. A dial cannot tell: it also succeeds when
// another process has taken the port.
func Listening(pid, port int) (bool, error) {
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, fmt.Errorf("read listening sockets: %w", err)
	}
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) >= 10 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, nil // exited: the caller sees it
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[link] {
			return true, nil
		}
	}
	return false, nil
}
