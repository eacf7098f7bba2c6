package testversity

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// Listening tells the process that holds a port from one that does not:
// the dial it replaces could not.
func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	for _, tc := range []struct {
		name string
		pid  int
		want bool
	}{
		{"the listener's process", os.Getpid(), true},
		{"another process", other.Process.Pid, false},
	} {
		got, err := Listening(tc.pid, port)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: Listening = %v, want %v", tc.name, got, tc.want)
		}
	}
	l.Close()
	if got, err := Listening(os.Getpid(), port); err != nil || got {
		t.Errorf("after Close: Listening = %v, %v; want false", got, err)
	}
}
