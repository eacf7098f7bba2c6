// Command walkstage-entrypoint is the GPU image's entrypoint. The CUDA build
// of walkstage cannot start without a usable driver (gorgonia.org/cu
// initialises CUDA when the process starts and exits if that fails, and the
// binary links libcuda.so.1, which only the NVIDIA container runtime
// provides), so the image ships two builds and this program picks one:
//
//	/usr/local/bin/walkstage                   this program
//	/usr/local/lib/walkstage/walkstage-cuda    GPU and CPU engines (cgo, cuda tag)
//	/usr/local/lib/walkstage/walkstage-cpu     CPU engine only (static)
//
// (the builds are looked up in ../lib/walkstage/ from this program). The
// engine asked for is the --engine flag of demo, walk and bench, else
// WALKSTAGE_ENGINE, else auto. For cpu it execs the CPU build at once. For
// gpu and auto it runs `walkstage-cuda gpu-probe`, which exits 0 only when
// the driver loads, initialises and a device takes a context and a memory
// round trip; then it execs the CUDA build. Otherwise auto logs why and
// execs the CPU build, and gpu fails with the probe's reason. Either build
// gets the same arguments and environment, as the process itself (exec), so
// signals and the exit status are walkstage's own.
//
// It is static (CGO_ENABLED=0) and needs no shell: the runtime images are
// distroless.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Names of the two builds in the library folder.
const (
	cudaBinary = "walkstage-cuda"
	cpuBinary  = "walkstage-cpu"
	// probeTimeout bounds `walkstage-cuda gpu-probe`: a driver that hangs
	// is no driver.
	probeTimeout = 60 * time.Second
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "walkstage entrypoint: cannot find its own path: %v\n", err)
		os.Exit(1)
	}
	os.Exit(run(self, os.Args[1:], os.Environ(), os.Stderr, syscall.Exec))
}

// execFunc replaces the process (syscall.Exec; tests record the call).
type execFunc func(path string, argv, env []string) error

// run picks the build next to self (this program's path) and execs it; it
// returns only on failure.
func run(self string, args, env []string, stderr io.Writer, exec execFunc) int {
	log := newLogger(env, stderr)
	dir := filepath.Join(filepath.Dir(self), "..", "lib", "walkstage")
	path, err := choose(wantedEngine(args, env), dir, func() error { return probe(filepath.Join(dir, cudaBinary), env) }, log)
	if err != nil {
		log.Error(err.Error())
		return 1
	}
	if err := exec(path, append([]string{path}, args...), env); err != nil {
		log.Error("walkstage entrypoint: exec failed", "binary", path, "error", err.Error())
		return 1
	}
	return 0
}

// wantedEngine is the engine the command line or the environment asks for:
// --engine of the commands that take it, else WALKSTAGE_ENGINE, else auto.
func wantedEngine(args, env []string) string {
	if len(args) > 0 && (args[0] == "demo" || args[0] == "walk" || args[0] == "bench") {
		rest := args[1:]
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			if a == "--" {
				break
			}
			name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.HasPrefix(a, "-") || name != "engine" {
				continue
			}
			if hasValue {
				return value
			}
			if i+1 < len(rest) {
				return rest[i+1]
			}
		}
		if args[0] == "bench" {
			return "cpu" // bench's own default
		}
	}
	if v, ok := lookupEnv(env, "WALKSTAGE_ENGINE"); ok && v != "" {
		return v
	}
	return "auto"
}

// choose returns the build to exec for engine; probe says whether the CUDA
// build can run here.
func choose(engine, dir string, probe func() error, log *slog.Logger) (string, error) {
	cuda, cpu := filepath.Join(dir, cudaBinary), filepath.Join(dir, cpuBinary)
	switch engine {
	case "gpu", "hybrid":
		if err := probe(); err != nil {
			return "", fmt.Errorf("walkstage: the GPU engine was asked for (engine %s) but this container cannot use a GPU: %v; "+
				"set WALKSTAGE_ENGINE=auto to fall back to the CPU engine, or run on a GPU node with the NVIDIA container runtime", engine, err)
		}
		return cuda, nil
	case "auto":
		if err := probe(); err != nil {
			log.Info("GPU engine unavailable, using the CPU engine", "reason", err.Error(), "binary", cpu)
			return cpu, nil
		}
		log.Info("GPU available, using the CUDA build", "binary", cuda)
		return cuda, nil
	default:
		// cpu, or a value walkstage itself will reject with its usual
		// message: no GPU needed for either.
		return cpu, nil
	}
}

// probe runs `walkstage-cuda gpu-probe` and returns nil when it exits 0,
// else an error with its output (the dynamic loader's message when
// libcuda.so.1 is missing, cu's when cuInit fails, the probe's own when no
// device takes a context).
func probe(cuda string, env []string) error {
	if _, err := os.Stat(cuda); err != nil {
		return fmt.Errorf("no CUDA build: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cuda, "gpu-probe")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	msg := strings.Join(strings.Fields(out.String()), " ")
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s gpu-probe did not answer in %v", cuda, probeTimeout)
	}
	if msg == "" {
		return fmt.Errorf("%s gpu-probe: %w", cuda, err)
	}
	return fmt.Errorf("%s gpu-probe: %w: %s", cuda, err, msg)
}

// newLogger logs as the stage does (WALKSTAGE_LOG_FORMAT json or text).
func newLogger(env []string, w io.Writer) *slog.Logger {
	if f, _ := lookupEnv(env, "WALKSTAGE_LOG_FORMAT"); f == "text" {
		return slog.New(slog.NewTextHandler(w, nil))
	}
	return slog.New(slog.NewJSONHandler(w, nil))
}

func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
