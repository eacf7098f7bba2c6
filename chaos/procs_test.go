package chaos

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walkstage/walkstage/internal/testversity"
)

// Binaries built once by TestMain; empty when the suite will not run.
var (
	walkstageBin string
	brokerBin    string
	buildErr     error
)

func TestMain(m *testing.M) {
	flag.Parse()
	var dir string
	// Build only when TestChaos will run: not under -short, and not when
	// it will skip for want of versitygw.
	if _, found := findVersityGW(); !testing.Short() && (found || os.Getenv("WALKSTAGE_INTEGRATION") == "1") {
		var err error
		dir, err = os.MkdirTemp("", "walkstage-chaos-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		walkstageBin = filepath.Join(dir, "walkstage")
		brokerBin = filepath.Join(dir, "kfakebroker")
		buildErr = goBuild(walkstageBin, "./cmd/walkstage")
		if buildErr == nil {
			buildErr = goBuild(brokerBin, "./internal/testbroker/cmd/kfakebroker")
		}
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// goBuild builds a package of this module (path relative to its root).
func goBuild(out, pkg string) error {
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is one child process whose output goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when Wait has returned
	waitErr error
	ours    atomic.Bool // set before we signal it to die
}

// startProc starts bin with args and environ (added to ours), stdout and
// stderr appended to logPath. If lines is not nil, stdout lines are also
// sent to it (without blocking once nobody reads). The process is
// SIGCONTed and SIGKILLed when the test ends.
func startProc(t testing.TB, name, logPath string, environ []string, lines chan<- string, bin string, args ...string) *proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), environ...)
	cmd.Stderr = logf
	var stdout io.ReadCloser
	if lines != nil {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	var copied sync.WaitGroup
	if stdout != nil {
		copied.Add(1)
		go func() {
			defer copied.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				fmt.Fprintln(logf, sc.Text())
				select {
				case lines <- sc.Text():
				default:
				}
			}
		}()
	}
	go func() {
		copied.Wait()
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill SIGKILLs the process (continuing it first, should it be stopped) and
// waits for it. It is a no-op on a process that has exited.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.ours.Store(true)
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) signal(s syscall.Signal) error { return p.cmd.Process.Signal(s) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitDesc describes how the process ended: "exit status 1", "signal: killed".
func (p *proc) exitDesc() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// startBroker runs kfakebroker, with no topics (the test creates them, as
// an operator would), on port (0: any free port) and returns its address
// once it listens. A broker started on the port of one that was killed is
// that broker come back with its log lost.
func startBroker(t testing.TB, logDir string, port int) (*proc, string) {
	t.Helper()
	lines := make(chan string, 16)
	logPath := filepath.Join(logDir, "broker.log")
	for try := 1; ; try++ {
		p := startProc(t, "kfakebroker", logPath, nil, lines, brokerBin,
			"-port", fmt.Sprint(port), "-min-session-timeout", "1s")
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case l := <-lines:
				if a, ok := strings.CutPrefix(l, "kfakebroker listening on "); ok {
					return p, a
				}
			case <-p.done:
				// The old process's port can take a moment to be free.
				if port != 0 && try < 50 && strings.Contains(tail(logPath, 3), "address already in use") {
					time.Sleep(100 * time.Millisecond)
					break wait
				}
				t.Fatalf("kfakebroker exited: %s\n%s", p.exitDesc(), tail(logPath, 20))
			case <-timeout:
				t.Fatalf("kfakebroker printed no address in 30 s\n%s", tail(logPath, 20))
			}
		}
	}
}

// versityGWBin finds versitygw as the sink tests do: $VERSITYGW, PATH, then
// ./bin at the repository root (scripts/test.sh installs it there).
func versityGWBin(t testing.TB) string {
	t.Helper()
	if p, ok := findVersityGW(); ok {
		return p
	}
	if os.Getenv("WALKSTAGE_INTEGRATION") == "1" {
		t.Fatal("versitygw not found ($VERSITYGW, PATH or ./bin) and WALKSTAGE_INTEGRATION=1")
	}
	t.Skip("versitygw not found ($VERSITYGW, PATH or ./bin): run scripts/test.sh, or `. scripts/lib.sh; ensure_tools`")
	return ""
}

func findVersityGW() (string, bool) {
	if b := os.Getenv("VERSITYGW"); b != "" {
		return b, true
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, true
	}
	if p, err := filepath.Abs("../bin/versitygw"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// S3 credentials shared by versitygw, the stage and the test's own client.
var s3Environ = []string{"AWS_ACCESS_KEY_ID=walkstage", "AWS_SECRET_ACCESS_KEY=walkstage-secret", "AWS_SESSION_TOKEN=",
	"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PROFILE=",
	"AWS_EC2_METADATA_DISABLED=true"}

// startVersityGW runs versitygw with a POSIX backend under dir and returns
// the process and its address once it accepts connections. With addr
// empty it picks a free port; a restart gives the old address (and the old
// dir: the same store come back).
func startVersityGW(t testing.TB, bin, logDir, dir, addr string) (*proc, string) {
	t.Helper()
	data, meta := filepath.Join(dir, "data"), filepath.Join(dir, "meta")
	for _, d := range []string{data, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(logDir, "versitygw.log")
	// The port is picked free and released before versitygw binds it:
	// another test's process can take it in between, and then a dial
	// reaches that process while ours exits. Ready is ours listening.
	fixed := addr
	for try := 1; ; try++ {
		if fixed == "" {
			addr = freeAddr(t)
		}
		port := addrPort(t, addr)
		p := startProc(t, "versitygw", logPath, nil, nil, bin, "--access", "walkstage", "--secret", "walkstage-secret",
			"--port", addr, "--quiet", "posix", "--sidecar", meta, data)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, err := testversity.Listening(p.cmd.Process.Pid, port)
			if err != nil {
				t.Fatalf("versitygw on %s: %v", addr, err)
			}
			if ok {
				return p, addr
			}
			if p.exited() {
				if (try < 5 || (fixed != "" && try < 50)) && strings.Contains(tail(logPath, 5), "address already in use") {
					if fixed != "" {
						time.Sleep(100 * time.Millisecond)
					}
					break
				}
				t.Fatalf("versitygw exited: %s\n%s", p.exitDesc(), tail(logPath, 20))
			}
			if time.Now().After(deadline) {
				t.Fatalf("versitygw did not listen on %s\n%s", addr, tail(logPath, 20))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// addrPort is the port of a host:port address.
func addrPort(t testing.TB, addr string) int {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}

func bucketURL(addr string) string {
	return "s3://walks?" + url.Values{"endpoint": {"http://" + addr}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitRecord is one end of a stage process.
type exitRecord struct {
	At   time.Duration // since the test began
	Desc string
	Ours bool // our SIGKILL or SIGTERM
}

// supervisor runs the stage as a child process, restarts it when it exits
// on its own (as Kubernetes would, after a second), and records every exit.
type supervisor struct {
	t       testing.TB
	env     []string
	logPath string
	t0      time.Time

	mu       sync.Mutex
	cur      *proc
	starts   int
	exits    []exitRecord
	stopping bool
	wg       sync.WaitGroup
}

func newSupervisor(t testing.TB, t0 time.Time, logPath string, env []string) *supervisor {
	s := &supervisor{t: t, env: env, logPath: logPath, t0: t0}
	t.Cleanup(func() {
		s.mu.Lock()
		s.stopping = true
		cur := s.cur
		s.mu.Unlock()
		if cur != nil {
			cur.kill()
		}
		s.wg.Wait()
	})
	return s
}

// start starts a stage process; the caller holds no lock.
func (s *supervisor) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
}

func (s *supervisor) startLocked() {
	s.starts++
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		fmt.Fprintf(f, "==== chaos: start #%d at +%.1fs\n", s.starts, time.Since(s.t0).Seconds())
		f.Close()
	}
	p := startProc(s.t, "walkstage", s.logPath, s.env, nil, walkstageBin, "run")
	s.cur = p
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-p.done
		s.mu.Lock()
		defer s.mu.Unlock()
		ours := p.ours.Load()
		s.exits = append(s.exits, exitRecord{At: time.Since(s.t0), Desc: p.exitDesc(), Ours: ours})
		if ours || s.stopping || s.cur != p {
			return
		}
		// It exited by itself: a failure the test reports. Restart it so
		// the rest of the run still tells us something.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			time.Sleep(time.Second)
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.stopping && s.cur == p {
				s.startLocked()
			}
		}()
	}()
}

// killAndRestart SIGKILLs the running stage and starts a new one.
func (s *supervisor) killAndRestart() {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		cur.kill()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == cur {
		s.startLocked()
	}
}

// stop ends the stage gracefully (SIGTERM, then SIGKILL after grace) and
// keeps it down; it returns how the last process ended.
func (s *supervisor) stop(grace time.Duration) string {
	s.mu.Lock()
	s.stopping = true
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return "never started"
	}
	if !cur.exited() {
		cur.ours.Store(true)
		cur.signal(syscall.SIGTERM)
		select {
		case <-cur.done:
		case <-time.After(grace):
			cur.kill()
			return "did not stop within " + grace.String() + " of SIGTERM; killed"
		}
	}
	<-cur.done
	return cur.exitDesc()
}

// unexpectedExits are the exits we did not cause.
func (s *supervisor) unexpectedExits() []exitRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []exitRecord
	for _, e := range s.exits {
		if !e.Ours {
			out = append(out, e)
		}
	}
	return out
}

// readiness polls /readyz and keeps every answer.
type readiness struct {
	mu      sync.Mutex
	samples []sample
}

type sampleState int

const (
	stateDown     sampleState = iota // no answer (process starting, dead or stopped)
	stateNotReady                    // an answer other than 200
	stateReady                       // 200
)

type sample struct {
	at    time.Time
	state sampleState
}

func pollReadiness(ctx context.Context, addr string, every time.Duration) *readiness {
	r := &readiness{}
	client := &http.Client{Timeout: time.Second}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			st := stateDown
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				st = stateNotReady
				if resp.StatusCode == http.StatusOK {
					st = stateReady
				}
			}
			r.mu.Lock()
			r.samples = append(r.samples, sample{time.Now(), st})
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

// waitReady waits for a 200 sample taken after since; false on timeout.
func (r *readiness) waitReady(ctx context.Context, since time.Time, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if at, ok := r.firstReadyAfter(since); ok {
			return at, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, false
}

func (r *readiness) firstReadyAfter(since time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if !s.at.Before(since) && s.state == stateReady {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// window counts the samples taken in [from, to] by state.
func (r *readiness) window(from, to time.Time) (n [3]int, firstReady time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		n[s.state]++
		if s.state == stateReady && firstReady.IsZero() {
			firstReady = s.at
		}
	}
	return n, firstReady
}
