package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestWantedEngine(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run"}, nil, "auto"},
		{[]string{"run"}, []string{"WALKSTAGE_ENGINE=gpu"}, "gpu"},
		{[]string{"run"}, []string{"WALKSTAGE_ENGINE=gpu", "WALKSTAGE_ENGINE=cpu"}, "cpu"}, // the last one wins, as in the kernel's env
		{[]string{"run"}, []string{"WALKSTAGE_ENGINE="}, "auto"},
		{[]string{"demo", "--engine", "cpu"}, []string{"WALKSTAGE_ENGINE=gpu"}, "cpu"},
		{[]string{"demo", "-engine=gpu", "--scale", "8"}, nil, "gpu"},
		{[]string{"demo", "--scale", "8"}, []string{"WALKSTAGE_ENGINE=cpu"}, "cpu"},
		{[]string{"walk", "--graph", "g.wsg", "--engine=cpu"}, nil, "cpu"},
		{[]string{"bench", "--scale", "10"}, nil, "cpu"}, // bench defaults to cpu
		{[]string{"bench", "--engine", "gpu"}, nil, "gpu"},
		{[]string{"demo", "--", "--engine", "gpu"}, nil, "auto"},
		{[]string{"run", "--engine", "gpu"}, nil, "auto"}, // run takes no --engine
		{nil, nil, "auto"},
	} {
		if got := wantedEngine(c.args, c.env); got != c.want {
			t.Errorf("wantedEngine(%q, %q) = %q, want %q", c.args, c.env, got, c.want)
		}
	}
}

func TestChoose(t *testing.T) {
	noGPU := errors.New("libcuda.so.1: cannot open shared object file")
	for _, c := range []struct {
		engine   string
		probe    error
		want     string // binary name, "" for an error
		probed   bool
		wantLog  string
		wantErrs []string
	}{
		{"auto", nil, cudaBinary, true, "using the CUDA build", nil},
		{"auto", noGPU, cpuBinary, true, "GPU engine unavailable, using the CPU engine", nil},
		{"gpu", nil, cudaBinary, true, "", nil},
		{"gpu", noGPU, "", true, "", []string{"engine gpu", "cannot use a GPU", "libcuda.so.1", "WALKSTAGE_ENGINE=auto"}},
		// The hybrid engine runs the GPU engine beside the CPU's: the CUDA
		// build, or an error as for gpu.
		{"hybrid", nil, cudaBinary, true, "", nil},
		{"hybrid", noGPU, "", true, "", []string{"engine hybrid", "cannot use a GPU", "WALKSTAGE_ENGINE=auto"}},
		{"cpu", nil, cpuBinary, false, "", nil},
		{"tpu", nil, cpuBinary, false, "", nil}, // walkstage's configuration check rejects it
	} {
		t.Run(c.engine+"/"+errString(c.probe), func(t *testing.T) {
			var logs bytes.Buffer
			probed := false
			got, err := choose(c.engine, "/lib/ws", func() error { probed = true; return c.probe }, newLogger([]string{"WALKSTAGE_LOG_FORMAT=text"}, &logs))
			if probed != c.probed {
				t.Errorf("probed = %v, want %v", probed, c.probed)
			}
			if c.want == "" {
				if err == nil {
					t.Fatalf("chose %s, want an error", got)
				}
				for _, s := range c.wantErrs {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || got != filepath.Join("/lib/ws", c.want) {
				t.Fatalf("chose %q, %v; want %s", got, err, c.want)
			}
			if !strings.Contains(logs.String(), c.wantLog) {
				t.Errorf("log %q does not say %q", logs.String(), c.wantLog)
			}
			if c.probe != nil && !strings.Contains(logs.String(), c.probe.Error()) {
				t.Errorf("log %q does not give the reason", logs.String())
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "gpu"
	}
	return "nogpu"
}

// layout builds the image's folders under a temporary root with a fake
// CUDA build (a script: its gpu-probe exits with probeStatus, printing
// probeOut) and returns the entrypoint's path and the library folder.
func layout(t *testing.T, probeStatus int, probeOut string) (self, lib string) {
	t.Helper()
	root := t.TempDir()
	self = filepath.Join(root, "usr/local/bin/walkstage")
	lib = filepath.Join(root, "usr/local/lib/walkstage")
	for _, d := range []string{filepath.Dir(self), lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\n[ \"$1\" = gpu-probe ] || exit 99\ntouch \"$0.probed\"\necho '" + probeOut + "' >&2\nexit " + strconv.Itoa(probeStatus) + "\n"
	if err := os.WriteFile(filepath.Join(lib, cudaBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, cpuBinary), []byte("#!/bin/sh\nexit 98\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return self, lib
}

// TestRunExecsTheChosenBuild runs the entrypoint's logic with the real
// probe against fake builds: the CUDA build's gpu-probe failing as it does
// without libcuda.so.1 (the dynamic loader's exit status 127), or passing.
func TestRunExecsTheChosenBuild(t *testing.T) {
	loaderErr := "walkstage-cuda: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory"
	for _, c := range []struct {
		name        string
		probeStatus int
		env         []string
		args        []string
		wantBinary  string // "" when run must fail without exec
		wantLog     string
	}{
		{"auto without a driver", 7, nil, []string{"demo", "--scale", "8"}, cpuBinary, "GPU engine unavailable, using the CPU engine"},
		{"auto with a GPU", 0, nil, []string{"run"}, cudaBinary, "using the CUDA build"},
		{"gpu without a driver", 7, []string{"WALKSTAGE_ENGINE=gpu"}, []string{"run"}, "", "cannot use a GPU"},
		{"gpu flag without a driver", 7, []string{"WALKSTAGE_ENGINE=auto"}, []string{"demo", "--engine", "gpu"}, "", "cannot use a GPU"},
		{"cpu never probes", 0, []string{"WALKSTAGE_ENGINE=cpu"}, []string{"run", "--check"}, cpuBinary, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			self, lib := layout(t, c.probeStatus, loaderErr)
			var stderr bytes.Buffer
			var gotPath string
			var gotArgv, gotEnv []string
			env := append([]string{"PATH=/usr/bin:/bin", "WALKSTAGE_LOG_FORMAT=text"}, c.env...)
			rc := run(self, c.args, env, &stderr, func(path string, argv, env []string) error {
				gotPath, gotArgv, gotEnv = path, argv, env
				return nil
			})
			if c.wantBinary == "" {
				if rc == 0 || gotPath != "" {
					t.Fatalf("rc %d, exec %q: want a failure without exec", rc, gotPath)
				}
			} else {
				if rc != 0 || gotPath != filepath.Join(lib, c.wantBinary) {
					t.Fatalf("rc %d, exec %q; want %s (stderr %s)", rc, gotPath, c.wantBinary, stderr.String())
				}
				if !slices.Equal(gotArgv[1:], c.args) || gotArgv[0] != gotPath || !slices.Equal(gotEnv, env) {
					t.Errorf("exec argv %q env %q, want the same arguments and environment", gotArgv, gotEnv)
				}
			}
			if !strings.Contains(stderr.String(), c.wantLog) {
				t.Errorf("stderr %q does not say %q", stderr.String(), c.wantLog)
			}
			_, err := os.Stat(filepath.Join(lib, cudaBinary+".probed"))
			if probed, want := err == nil, c.env == nil || !slices.Contains(c.env, "WALKSTAGE_ENGINE=cpu"); probed != want {
				t.Errorf("probed = %v, want %v", probed, want)
			}
			if c.probeStatus == 7 && !strings.Contains(stderr.String(), "libcuda.so.1") {
				t.Errorf("stderr %q does not give the probe's reason", stderr.String())
			}
		})
	}
}
