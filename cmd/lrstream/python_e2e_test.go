package main

import (
	"bytes"
	"github.com/lrstream/lrstream/internal/testkit"

	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pythonInterpreter returns the interpreter for the client tests
// (LRSTREAM_PYTHON, default /usr/bin/python3), skipping the test when it
// lacks msgpack or numpy.
func pythonInterpreter(t *testing.T) string {
	py := os.Getenv("LRSTREAM_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := exec.Command(py, "-c", "import msgpack, numpy").Run(); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s cannot import msgpack and numpy: %v", py, err)
		}
		t.Skipf("%s cannot import msgpack and numpy: %v", py, err)
	}
	return py
}

// TestPythonClientEndToEnd runs the Python client against the lrstream
// binary: `stream` through a pipe and `serve` with 3 socket workers, every
// batch checked against the expected per-frame outcomes and the parquet
// values.
func TestPythonClientEndToEnd(t *testing.T) {
	py := pythonInterpreter(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	tmp := t.TempDir()
	bin := testBinary
	ds := shared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	feats := testkit.ReadFrames(t, ds, "action", "observation.state").Values
	fj, _ := json.Marshal(feats)
	fpath := filepath.Join(tmp, "features.json")
	if err := os.WriteFile(fpath, fj, 0o644); err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "lrs-e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	cmd := exec.Command(py, filepath.Join("testdata", "e2e_client.py"), bin, ds,
		shared(t, "recipes", "subtask_mem_vqa_speech.yaml"),
		filepath.Join(ds, "expected", "subtask_mem_vqa_speech.step.jsonl"), fpath, sockDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	// A consumer that closes the pipe early ends lrstream cleanly: exit 0,
	// nothing on stderr but the one summary line a non-terminal gets
	// (--cameras none: the demo's cameras have no videos, which auto
	// would note on stderr).
	c := exec.Command("/bin/bash", "-c", `set -o pipefail; "$0" stream --batch-size 4 --cameras none 2>"$1" | head -c 100 >/dev/null`, bin, filepath.Join(tmp, "stderr"))
	if err := c.Run(); err != nil {
		t.Fatalf("stream into a closed pipe: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(tmp, "stderr")); bytes.Count(b, []byte("\n")) > 1 || (len(b) != 0 && !bytes.HasPrefix(b, []byte("stream: "))) {
		t.Fatalf("stream into a closed pipe wrote more than its summary line to stderr: %s", b)
	}
}
