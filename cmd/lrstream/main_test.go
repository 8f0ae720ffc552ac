package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// asMainEnv, when set to "1", makes this test binary run as the lrstream
// command itself (main) instead of running the tests.
const asMainEnv = "LRSTREAM_TEST_AS_MAIN"

// testBinary is the path of an executable named lrstream that runs this
// package's main: a symlink to the test binary, set by TestMain. Tests
// that need the real command line (subprocesses killed mid-run, several
// rank processes, the Python client, the documented shell blocks) run it
// instead of building the binary again with `go build` (a link of the
// whole program per test: seconds each on a cold, 2-core machine).
var testBinary string

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" && !fuzzWorker() {
		main() // exits
	}
	os.Exit(runTests(m))
}

// fuzzWorker reports whether this process is a `go test -fuzz` worker
// (started by the test binary, so it inherits asMainEnv, but it fuzzes).
func fuzzWorker() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			return true
		}
	}
	return false
}

func runTests(m *testing.M) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test binary path:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "lrstream-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testBinary = filepath.Join(dir, "lrstream")
	if err := os.Symlink(exe, testBinary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The tests' frame cache is theirs, not the user's (children and
	// in-process runs without --frame-cache-dir use it).
	if err := os.Setenv(frameCacheDirEnv, filepath.Join(dir, "frames")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Children inherit it: every process started from testBinary (directly,
	// through a shell block or the Python client) runs main.
	if err := os.Setenv(asMainEnv, "1"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
