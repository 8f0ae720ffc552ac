// Package testkit holds helpers shared by lrstream's tests: where the
// module and the read-only reference material (../shared) are.
package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot returns the directory holding go.mod, walking up from the
// test's working directory (its package directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Shared returns the path of parts under the reference material, the
// directory ../shared next to the module root. Tests read it in place and
// never write to it.
func Shared(t testing.TB, parts ...string) string {
	t.Helper()
	return filepath.Join(append([]string{ModuleRoot(t), "..", "shared"}, parts...)...)
}
