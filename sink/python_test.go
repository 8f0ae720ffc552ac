package sink

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// moduleRoot is the directory holding go.mod.
func moduleRoot(t *testing.T) string { return testkit.ModuleRoot(t) }

// TestPythonClient writes streams with the Go sinks and runs the Python
// client's unit tests against them (python/tests; the Go-written fixtures
// are checked by test_go_fixtures.py). The interpreter is $LRSTREAM_PYTHON,
// default /usr/bin/python3; the test skips when it lacks msgpack or numpy.
func TestPythonClient(t *testing.T) {
	py := os.Getenv("LRSTREAM_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import msgpack, numpy").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import msgpack and numpy: %v\n%s", py, err, out)
	}
	dir := t.TempDir()
	// LRSTREAM_WRITE_FIXTURES=DIR only writes the fixtures there (for
	// pytest's python/tests/conftest.py) without running Python.
	keep := os.Getenv("LRSTREAM_WRITE_FIXTURES")
	if keep != "" {
		dir = keep
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	full := encodeFixture(t, 100, 16, true)
	write("stream.msgpack", full)
	var jl bytes.Buffer
	writeFixture(t, NewJSONL(&jl), 100, 16, true)
	write("stream.jsonl", jl.Bytes())
	write("truncated.msgpack", full[:len(full)-3])
	var failed bytes.Buffer
	s := NewMsgpack(&failed)
	writeFixtureHeaderOnly(t, s)
	if err := s.Fail(errors.New("render: episode 7 frame 3: boom")); err != nil {
		t.Fatal(err)
	}
	write("error.msgpack", failed.Bytes())
	if keep != "" {
		return
	}

	root := moduleRoot(t)
	// Read the Python sources so that go test's cache notices their changes.
	if err := filepath.WalkDir(filepath.Join(root, "python"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".py" {
			return err
		}
		_, err = os.ReadFile(p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-v", "-p", "test_[rg]*.py", "-s", filepath.Join(root, "python", "tests"))
	cmd.Env = append(os.Environ(), "LRSTREAM_FIXTURES="+dir, "PYTHONPATH="+filepath.Join(root, "python"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func writeFixtureHeaderOnly(t *testing.T, s Sink) {
	t.Helper()
	if err := s.Header(Header{Dataset: "x", BatchSize: 4}); err != nil {
		t.Fatal(err)
	}
}
