package deploy

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Line int
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
}

// stage is one FROM ... [AS name] and the instructions under it. Base is
// the image as written, with the global ARGs' defaults (those before the
// first FROM) put in for ${NAME}: the image a build without --build-arg
// uses.
type stage struct {
	Name, Base string
	Instrs     []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages []stage
		cur    strings.Builder
		start  int
		global = map[string]string{} // ARG defaults before the first FROM
	)
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "ARG" && len(stages) == 0 {
			name, def, _ := strings.Cut(in.Args, "=")
			global[name] = def
			return
		}
		if in.Cmd == "FROM" {
			fields := strings.Fields(in.Args)
			s := stage{Base: os.Expand(fields[0], func(k string) string { return global[k] })}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.Name = fields[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
		}
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue // comments may sit inside a continued instruction too
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

var (
	shellSeparators = regexp.MustCompile(`&&|\|\||[;|()\n]`)
	makeTarget      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// makeTargets lists the targets of every `make ...` command in shell text:
// flags and VAR=value assignments are not targets.
func makeTargets(script string) []string {
	var targets []string
	for _, line := range strings.Split(script, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		for _, cmd := range shellSeparators.Split(line, -1) {
			fields := strings.Fields(cmd)
			for i := 0; i < len(fields); i++ {
				if fields[i] != "make" && !strings.HasSuffix(fields[i], "/make") {
					continue
				}
				for j := i + 1; j < len(fields); j++ {
					f := strings.Trim(fields[j], `"'`)
					switch {
					case f == "-f" || f == "-C" || f == "-I" || f == "-o" || f == "-W":
						j++ // the flag's argument
					case strings.HasPrefix(f, "-"), strings.Contains(f, "="):
					case makeTarget.MatchString(f):
						targets = append(targets, f)
					}
				}
				break
			}
		}
	}
	return targets
}

// TestDockerfileBuildsWhatCIRuns: each `make` target the Dockerfile runs is
// one .ci/run runs too, so the image is built by the steps CI checks.
func TestDockerfileBuildsWhatCIRuns(t *testing.T) {
	stages := parseDockerfile(t, "../Dockerfile")
	ciPath := "../.ci/run"
	if p := os.Getenv("WALKSTAGE_CI_RUN"); p != "" {
		ciPath = p // another copy of CI's script, for trying a change to it
	}
	ci, err := os.ReadFile(ciPath)
	if err != nil {
		t.Fatalf(".ci/run is missing (%v): the Dockerfile must build with the make targets CI runs, so CI has to exist to compare against", err)
	}
	ciTargets := makeTargets(string(ci))
	if len(ciTargets) == 0 {
		t.Fatal(".ci/run runs no make target")
	}
	var dockerTargets []string
	aptToolkit := false
	for _, s := range stages {
		for _, in := range s.Instrs {
			if in.Cmd != "RUN" {
				continue
			}
			for _, target := range makeTargets(in.Args) {
				dockerTargets = append(dockerTargets, target)
				if !slices.Contains(ciTargets, target) {
					t.Errorf("Dockerfile line %d runs `make %s`, which .ci/run never runs (CI runs %v)", in.Line, target, ciTargets)
				}
			}
			aptToolkit = aptToolkit || strings.Contains(in.Args, "nvidia-cuda-toolkit")
		}
	}
	for _, want := range []string{"build", "kernels", "build-cuda-bin"} {
		if !slices.Contains(dockerTargets, want) {
			t.Errorf("the Dockerfile never runs `make %s` (it runs %v)", want, dockerTargets)
		}
	}
	if aptToolkit && !strings.Contains(string(ci), "nvidia-cuda-toolkit") {
		t.Error("the Dockerfile installs nvidia-cuda-toolkit but .ci/run does not: they build with different toolchains")
	}
}

func TestMakeTargetsParsing(t *testing.T) {
	for _, c := range []struct {
		script string
		want   []string
	}{
		{"make test", []string{"test"}},
		{"make kernels && make build-cuda-bin VERSION=\"${VERSION}\"", []string{"kernels", "build-cuda-bin"}},
		{"cd x; make -f Makefile.cuda -j4 vet-cuda build # make not-this", []string{"vet-cuda", "build"}},
		{"# make commented\nrun make -C dir build", []string{"build"}},
		{"apt-get install make", nil},
	} {
		if got := makeTargets(c.script); !slices.Equal(got, c.want) {
			t.Errorf("makeTargets(%q) = %v, want %v", c.script, got, c.want)
		}
	}
}

// TestDockerfileRuntimeStages checks the two images that ship: minimal
// bases, non-root, no CUDA driver library, labels, port, `walkstage run`,
// and the files each holds (the GPU image: its entrypoint and both builds;
// TestGPUImageRunsWithoutGPU runs them).
func TestDockerfileRuntimeStages(t *testing.T) {
	stages := parseDockerfile(t, "../Dockerfile")
	byName := map[string]stage{}
	for _, s := range stages {
		byName[s.Name] = s
	}
	if last := stages[len(stages)-1]; last.Name != "gpu" {
		t.Errorf("the default (last) target is %q, want gpu", last.Name)
	}
	values := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	port := envString(lookup(values, "metrics.port"))
	for _, c := range []struct {
		name, base string
		copies     []string // SRC DEST of each COPY --from=...
		nvidiaEnv  bool
	}{
		// The GPU image: the entrypoint (cmd/walkstage-entrypoint) at
		// walkstage's path, the two builds where it looks for them
		// (../lib/walkstage/ from itself).
		{"gpu", "gcr.io/distroless/base-debian12:nonroot", []string{
			"/src/bin/walkstage-entrypoint /usr/local/bin/walkstage",
			"/src/bin/walkstage /usr/local/lib/walkstage/walkstage-cpu",
			"/src/bin/walkstage-cuda /usr/local/lib/walkstage/walkstage-cuda"}, true},
		{"cpu", "gcr.io/distroless/static-debian12:nonroot", []string{"/src/bin/walkstage /usr/local/bin/walkstage"}, false},
	} {
		s, ok := byName[c.name]
		if !ok {
			t.Errorf("no stage %q", c.name)
			continue
		}
		if s.Base != c.base {
			t.Errorf("stage %s is FROM %s, want %s", c.name, s.Base, c.base)
		}
		var (
			user, expose, entrypoint, cmd string
			labels, env                   strings.Builder
			copies                        []string
		)
		for _, in := range s.Instrs {
			switch in.Cmd {
			case "USER":
				user = in.Args
			case "EXPOSE":
				expose += " " + in.Args
			case "ENTRYPOINT":
				entrypoint = in.Args
			case "CMD":
				cmd = in.Args
			case "LABEL":
				labels.WriteString(in.Args + " ")
			case "ENV":
				env.WriteString(in.Args + " ")
			case "COPY", "ADD":
				copies = append(copies, in.Args)
			case "RUN":
				t.Errorf("stage %s line %d: RUN in a runtime stage (distroless has no shell; build in a build stage)", c.name, in.Line)
			}
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("stage %s runs as %q: want a numeric non-root uid (Kubernetes' runAsNonRoot can only verify numbers)", c.name, user)
		}
		if !slices.Contains(strings.Fields(expose), port) {
			t.Errorf("stage %s exposes %q, not the metrics port %s", c.name, expose, port)
		}
		// The binary listens on loopback unless told otherwise; an image
		// must answer on the container's network for the exposed port (and
		// a pod's probes) to work.
		if want := "WALKSTAGE_METRICS_ADDR=:" + port; !slices.Contains(strings.Fields(env.String()), want) {
			t.Errorf("stage %s does not set %s (ENV %s)", c.name, want, env.String())
		}
		var argv []string
		for _, form := range []string{entrypoint, cmd} {
			var part []string
			if err := json.Unmarshal([]byte(form), &part); err != nil {
				t.Errorf("stage %s: %q is not exec (JSON) form", c.name, form)
			}
			argv = append(argv, part...)
		}
		if len(argv) != 2 || filepath.Base(argv[0]) != "walkstage" || argv[1] != "run" {
			t.Errorf("stage %s runs %v by default, want walkstage run", c.name, argv)
		}
		for _, l := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source",
			"org.opencontainers.image.version", "org.opencontainers.image.revision"} {
			if !strings.Contains(labels.String(), l+"=") {
				t.Errorf("stage %s has no %s label", c.name, l)
			}
		}
		hasNvidia := strings.Contains(env.String(), "NVIDIA_VISIBLE_DEVICES=") && strings.Contains(env.String(), "NVIDIA_DRIVER_CAPABILITIES=")
		if hasNvidia != c.nvidiaEnv {
			t.Errorf("stage %s: NVIDIA_VISIBLE_DEVICES/NVIDIA_DRIVER_CAPABILITIES declared = %v, want %v", c.name, hasNvidia, c.nvidiaEnv)
		}
		var paths []string
		for _, cp := range copies {
			var f []string
			for _, x := range strings.Fields(cp) {
				if !strings.HasPrefix(x, "--") {
					f = append(f, x)
				}
			}
			paths = append(paths, strings.Join(f, " "))
		}
		if !slices.Equal(paths, c.copies) {
			t.Errorf("stage %s copies %q: want %q", c.name, paths, c.copies)
		}
		for _, cp := range copies {
			if strings.Contains(strings.ToLower(cp), "libcuda") || strings.Contains(cp, "/usr/lib") {
				t.Errorf("stage %s copies libraries (%s): the NVIDIA runtime injects the driver's", c.name, cp)
			}
		}
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "gpu/kernels.fatbin", "gpu/pack.fatbin", "bin"} {
		if !slices.Contains(strings.Fields(string(ignore)), p) {
			t.Errorf(".dockerignore lacks %s (the image must build its own binaries and kernels)", p)
		}
	}
}

// digestRef is an image named by its content: NAME[:TAG]@sha256:<64 hex>.
var digestRef = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)

// TestDockerfileBuildBaseIsPinned: the build stages' base (GO_IMAGE) is
// pinned by digest, so two builds of one commit use the same Go toolchain
// and Debian packages until the digest is changed on purpose (issue 39).
// The runtime bases are checked by TestDockerfileRuntimeStages.
func TestDockerfileBuildBaseIsPinned(t *testing.T) {
	n := 0
	for _, s := range parseDockerfile(t, "../Dockerfile") {
		if !strings.HasPrefix(s.Name, "build-") {
			continue
		}
		n++
		if !digestRef.MatchString(s.Base) {
			t.Errorf("build stage %s is FROM %s: want an image pinned by digest (NAME:TAG@sha256:...)", s.Name, s.Base)
		}
	}
	if n == 0 {
		t.Fatal("no build-* stage in the Dockerfile")
	}
}
