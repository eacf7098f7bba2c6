// Package testtool finds the external programs the integration tests run
// as processes of their own (versitygw, SeaweedFS's weed), which
// scripts/test.sh installs into the repository's bin/.
package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
)

// Find locates program name: the path in environment variable env when
// set, else name on PATH, else bin/name in the first directory upwards
// that holds go.mod (where scripts/test.sh installs it); "" when none.
func Find(env, name string) string {
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", name)
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
