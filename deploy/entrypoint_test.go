package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// imageCopy is one COPY --from=STAGE SRC DEST of a runtime stage.
type imageCopy struct{ from, src, dest string }

func runtimeCopies(t *testing.T, stageName string) []imageCopy {
	t.Helper()
	var out []imageCopy
	for _, s := range parseDockerfile(t, "../Dockerfile") {
		if s.Name != stageName {
			continue
		}
		for _, in := range s.Instrs {
			if in.Cmd != "COPY" {
				continue
			}
			var c imageCopy
			var paths []string
			for _, f := range strings.Fields(in.Args) {
				if v, ok := strings.CutPrefix(f, "--from="); ok {
					c.from = v
				} else if !strings.HasPrefix(f, "--") {
					paths = append(paths, f)
				}
			}
			if len(paths) != 2 {
				t.Fatalf("Dockerfile line %d: COPY %s: want one source and one destination", in.Line, in.Args)
			}
			c.src, c.dest = paths[0], paths[1]
			out = append(out, c)
		}
	}
	return out
}

// goBuild builds a static walkstage command into dir (-trimpath, as make
// build does, so the build cache is shared with it).
func goBuild(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out := filepath.Join(dir, name)
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// TestGPUImageRunsWithoutGPU lays out the GPU image's files as its COPY
// instructions place them, under a temporary root, and runs its entrypoint
// on this machine, which has no GPU driver (CI's has none): `walkstage demo`
// must complete on the CPU engine with the fallback logged, and
// WALKSTAGE_ENGINE=gpu must fail and say why. The entrypoint and the CPU
// build are built from this tree; the CUDA build is bin/walkstage-cuda when
// `make build-cuda-bin` has made it (CI does, before the tests), else a
// stand-in that fails as that binary does without libcuda.so.1.
func TestGPUImageRunsWithoutGPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux")
	}
	if testing.Short() {
		t.Skip("builds walkstage and runs the demo")
	}
	build := t.TempDir()
	local := map[string]string{
		"/src/bin/walkstage-entrypoint": goBuild(t, build, "./cmd/walkstage-entrypoint", "walkstage-entrypoint"),
		"/src/bin/walkstage":            goBuild(t, build, "./cmd/walkstage", "walkstage"),
	}
	cuda, err := filepath.Abs("../bin/walkstage-cuda")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cuda); err != nil {
		t.Logf("no bin/walkstage-cuda (make build-cuda-bin): a stand-in fails as it does without a driver")
		cuda = filepath.Join(build, "walkstage-cuda")
		stub := "#!/bin/sh\necho \"$0: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory\" >&2\nexit 127\n"
		if err := os.WriteFile(cuda, []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	} else if exec.Command(cuda, "gpu-probe").Run() == nil {
		t.Skip("this machine has a usable GPU: the image would run its CUDA build")
	}
	local["/src/bin/walkstage-cuda"] = cuda

	root := t.TempDir()
	var entrypoint string
	for _, c := range runtimeCopies(t, "gpu") {
		src, ok := local[c.src]
		if !ok {
			t.Fatalf("the gpu stage copies %s, which this test does not know how to build", c.src)
		}
		dest := filepath.Join(root, c.dest)
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			t.Fatal(err)
		}
		if c.dest != "/usr/local/bin/walkstage" {
			if err := os.Symlink(src, dest); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// The entrypoint finds the builds from its own path, which the
		// kernel gives with links resolved: a copy.
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dest, b, 0o755); err != nil {
			t.Fatal(err)
		}
		entrypoint = dest
	}
	if entrypoint == "" {
		t.Fatal("the gpu stage puts nothing at /usr/local/bin/walkstage, its ENTRYPOINT")
	}

	start := func(env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, entrypoint, args...)
		cmd.Dir = root
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + root, "WALKSTAGE_LOG_FORMAT=text"}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := start(nil, "demo", "--dir", filepath.Join(root, "demo"), "--scale", "8")
	if err != nil {
		t.Fatalf("demo through the GPU image's entrypoint: %v\n%s", err, out)
	}
	for _, want := range []string{"GPU engine unavailable, using the CPU engine", "gpu-probe", "walkstage-cpu", "engine cpu", "done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output does not say %q:\n%s", want, out)
		}
	}

	out, err = start([]string{"WALKSTAGE_ENGINE=gpu"}, "run", "--check")
	if err == nil || !strings.Contains(out, "cannot use a GPU") || !strings.Contains(out, "gpu-probe") {
		t.Errorf("WALKSTAGE_ENGINE=gpu without a GPU: err %v, want a failure that says why:\n%s", err, out)
	}
}
