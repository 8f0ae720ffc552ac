package xet

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// oracleInputs are the hash oracle's files: sizes around the chunk bounds,
// random and low-entropy data, and real files of the conformance datasets
// and the demo dataset (parquet, mp4).
func oracleInputs(t *testing.T) map[string]string {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	lowEntropy := make([]byte, 3<<20)
	for i := range lowEntropy {
		lowEntropy[i] = "ab"[rng.IntN(2)]
	}
	cases := map[string][]byte{
		"empty":          {},
		"one-byte":       {0x5a},
		"min-minus-1":    random(MinChunkSize - 1),
		"min":            random(MinChunkSize),
		"min-plus-1":     random(MinChunkSize + 1),
		"max-minus-1":    random(MaxChunkSize - 1),
		"max":            random(MaxChunkSize),
		"max-plus-1":     random(MaxChunkSize + 1),
		"random-5MB":     random(5 << 20),
		"zeros-3MB":      make([]byte, 3<<20),
		"zeros-then-rnd": append(make([]byte, 300<<10), random(700<<10)...),
		"low-entropy":    lowEntropy,
		"text":           bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog\n"), 40000),
	}
	paths := map[string]string{}
	for name, data := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	for name, p := range map[string]string{
		"conformance-parquet": "../../../shared/conformance/datasets/pub_inferred_front_wrist/meta/episodes/chunk-000/file-000.parquet",
		"demo-parquet":        "../../testdata/demo/meta/tasks.parquet",
		"demo-mp4":            "../../testdata/demo/videos/observation.images.front/chunk-000/file-000.mp4",
	} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("oracle input %s: %v", name, err)
		}
		paths[name] = p
	}
	return paths
}

// python returns the interpreter of the test venv, or skips (fails with
// LRSTREAM_REQUIRE_PYTHON) when it cannot import hf_xet.
func python(t *testing.T) string {
	py := os.Getenv("LRSTREAM_PYTHON")
	if py == "" {
		py = "python3"
	}
	if out, err := exec.Command(py, "-c", "import hf_xet").CombinedOutput(); err != nil {
		if os.Getenv("LRSTREAM_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s cannot import hf_xet: %v\n%s", py, err, out)
		}
		t.Skipf("SKIPPED: %s cannot import hf_xet (set LRSTREAM_PYTHON to the test venv): %v", py, err)
	}
	return py
}

// TestHashOracle: the Go chunker and hashes give hf_xet's Xet hash (and
// size) for every input.
func TestHashOracle(t *testing.T) {
	py := python(t)
	paths := oracleInputs(t)
	names := make([]string, 0, len(paths))
	list := make([]string, 0, len(paths))
	for n, p := range paths {
		names = append(names, n)
		list = append(list, p)
	}
	arg, _ := json.Marshal(list)
	script := `import json, sys, hf_xet
r = hf_xet.hash_files(json.loads(sys.argv[1]))
print(json.dumps([[x.hash, x.file_size] for x in r]))`
	out, err := exec.Command(py, "-c", script, string(arg)).Output()
	if err != nil {
		t.Fatalf("hf_xet.hash_files: %v", err)
	}
	var want [][2]any
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(list) {
		t.Fatalf("hf_xet output %q: %v", out, err)
	}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(list[i])
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, chunks, size, err := HashReader(f)
			if err != nil {
				t.Fatal(err)
			}
			if h.String() != want[i][0].(string) || float64(size) != want[i][1].(float64) {
				t.Fatalf("hash %s size %d (%d chunks), hf_xet says %v size %v", h, size, len(chunks), want[i][0], want[i][1])
			}
			for j, c := range chunks {
				last := j == len(chunks)-1
				if c.Size > MaxChunkSize || (!last && c.Size < MinChunkSize) {
					t.Fatalf("chunk %d: %d bytes, outside [%d, %d]", j, c.Size, MinChunkSize, MaxChunkSize)
				}
			}
		})
	}
}

// TestHashText: the text form of a hash is xet-core's (little-endian
// words) and parses back.
func TestHashText(t *testing.T) {
	var h Hash
	for i := range h {
		h[i] = byte(i)
	}
	const want = "07060504030201000f0e0d0c0b0a090817161514131211101f1e1d1c1b1a1918"
	if h.String() != want {
		t.Fatalf("String() = %s, want %s", h, want)
	}
	back, err := ParseHash(want)
	if err != nil || back != h {
		t.Fatalf("ParseHash: %v %v", back, err)
	}
	for _, bad := range []string{"", "xyz", want[:63], want + "0", "g" + want[1:]} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q): no error", bad)
		}
	}
}

// TestChunkerStreams: the chunks do not depend on how the reader splits
// the stream.
func TestChunkerStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 2<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want, _, _, _ := HashReader(bytes.NewReader(data))
	for _, step := range []int{1, 7, 4096, MaxChunkSize + 3} {
		got, _, _, err := HashReader(&stepReader{data: data, step: step})
		if err != nil || got != want {
			t.Fatalf("step %d: %s %v, want %s", step, got, err, want)
		}
	}
}

type stepReader struct {
	data []byte
	step int
}

func (s *stepReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.step)], s.data)
	s.data = s.data[n:]
	return n, nil
}

// BenchmarkHashReader: chunking and hashing throughput (the pass Publish
// makes over every file before it uploads).
func BenchmarkHashReader(b *testing.B) {
	data := make([]byte, 64<<20)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, _, err := HashReader(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkXorbAdd: packing chunks into a xorb (LZ4 tried on each).
func BenchmarkXorbAdd(b *testing.B) {
	chunk := make([]byte, TargetChunkSize)
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range chunk {
		chunk[i] = byte(rng.Uint32() % 16) // compressible
	}
	b.SetBytes(int64(len(chunk)))
	var x Xorb
	for b.Loop() {
		if !x.Fits(len(chunk)) {
			x.Reset()
		}
		x.Add(chunk)
	}
}
