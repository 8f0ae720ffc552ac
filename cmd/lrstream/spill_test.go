package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/testtmpfs"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/sink"
)

// TestShuffleSpillFlag: --shuffle-spill (or LRSTREAM_SHUFFLE_SPILL)
// streams the same bytes as holding the frames in memory, leaves nothing
// in its directory, and a directory that does not exist is a usage error;
// so is a --shuffle-spill-gb (or LRSTREAM_SHUFFLE_SPILL_GB) that is not a
// size or that no buffer fits, and one that fits streams the same bytes.
func TestShuffleSpillFlag(t *testing.T) {
	// 96×64 cameras: a sample's frames are large enough (32 KiB) to be
	// held in an array of their own, which is what spills.
	ds := genCameraDataset(t, filepath.Join(t.TempDir(), "cams"), 3, 8, 12, 96, 64)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	args := []string{"stream", "-q", "--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "4",
		"--cameras", "all", "--shuffle", "--seed", "5", "--shuffle-buffer", "12", "--shuffle-buffer-bytes", "0"}
	runEnv := func(vars map[string]string, extra ...string) (string, string, int) {
		t.Helper()
		e, out, errb := genEnv()
		e.getenv = func(k string) string { return vars[k] }
		code := run(context.Background(), e, append(append([]string{}, args...), extra...))
		return out.String(), errb.String(), code
	}
	want, errb, code := runEnv(nil)
	if code != 0 {
		t.Fatalf("stream: %s", errb)
	}
	spill := t.TempDir()
	missing := filepath.Join(spill, "missing")
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		flags []string
		fail  string
		// inBand: the failure is the stream's, also given in-band
		// (its first message), not a usage error.
		inBand bool
	}{
		{name: "flag", flags: []string{"--shuffle-spill", spill}},
		{name: "environment", vars: map[string]string{shuffleSpillEnv: spill}},
		{name: "flag over environment", vars: map[string]string{shuffleSpillEnv: missing}, flags: []string{"--shuffle-spill", spill}},
		{name: "missing directory", flags: []string{"--shuffle-spill", missing}, fail: "--shuffle-spill"},
		{name: "not a directory", flags: []string{"--shuffle-spill", recipe}, fail: "not a directory"},
		{name: "disk budget", flags: []string{"--shuffle-spill", spill, "--shuffle-spill-gb", "1.5"}},
		{name: "disk budget from the environment", vars: map[string]string{shuffleSpillEnv: spill, shuffleSpillGBEnv: "2"}},
		{name: "no disk budget", flags: []string{"--shuffle-spill", spill, "--shuffle-spill-gb", "0"}},
		{name: "a budget nothing fits", flags: []string{"--shuffle-spill", spill, "--shuffle-spill-gb", "0.000001"}, fail: "--shuffle-spill-gb 1e-06: one consumer's spill needs at least", inBand: true},
		{name: "bad budget", flags: []string{"--shuffle-spill", spill, "--shuffle-spill-gb", "lots"}, fail: `--shuffle-spill-gb "lots": want a positive number of GB`},
		{name: "bad budget in the environment", vars: map[string]string{shuffleSpillGBEnv: "-3"}, fail: `--shuffle-spill-gb "-3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errb, code := runEnv(tc.vars, tc.flags...)
			if tc.fail != "" && tc.inBand {
				m, err := sink.NewDecoder(strings.NewReader(got)).Next()
				if code == 0 || !strings.Contains(errb, tc.fail) || err != nil || m.Type != sink.TypeError || !strings.Contains(m.Error, tc.fail) {
					t.Fatalf("exit %d, stderr %q, first message %v (%v): want the error naming %q on stderr and in-band first", code, errb, m, err, tc.fail)
				}
				return
			}
			if tc.fail != "" {
				if code == 0 || !strings.Contains(errb, tc.fail) || got != "" {
					t.Fatalf("exit %d, stderr %q, %d bytes out: want a usage error naming %q and nothing streamed", code, errb, len(got), tc.fail)
				}
				return
			}
			if code != 0 {
				t.Fatalf("stream: %s", errb)
			}
			if got != want {
				t.Fatalf("%d bytes with the spill, %d without: the output differs", len(got), len(want))
			}
			if left, err := os.ReadDir(spill); err != nil || len(left) != 0 {
				t.Fatalf("spill directory after the stream: %v %v, want empty", left, err)
			}
		})
	}
}

// serveSpillPaths returns a socket path and an empty spill directory
// under a new directory of a short path (unix socket names are limited),
// removed when the test ends.
func serveSpillPaths(t *testing.T) (sock, spill string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "lrs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, spill = filepath.Join(dir, "s.sock"), filepath.Join(dir, "spill")
	if err := os.Mkdir(spill, 0o700); err != nil {
		t.Fatal(err)
	}
	return sock, spill
}

// TestServeShuffleSpill: serve --shuffle-spill gives each client its own
// spill file (two clients at once here) and the batches `stream` gives
// the same consumer without a spill.
func TestServeShuffleSpill(t *testing.T) {
	ds := genCameraDataset(t, filepath.Join(t.TempDir(), "cams"), 4, 8, 12, 96, 64)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	common := []string{"--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "4",
		"--cameras", "all", "--shuffle", "--seed", "9", "--shuffle-buffer", "16", "--shuffle-buffer-bytes", "0"}
	sock, spill := serveSpillPaths(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		e, _, _ := genEnv()
		done <- run(ctx, e, append([]string{"serve", "-q", "--socket", sock, "--shuffle-spill", spill}, common...))
	}()
	defer func() { cancel(); <-done }()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("no socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	type got struct {
		raws [][]byte
		err  error
	}
	results := make([]chan got, 2)
	for r := range results {
		results[r] = make(chan got, 1)
		go func() {
			c, err := net.Dial("unix", sock)
			if err != nil {
				results[r] <- got{err: err}
				return
			}
			defer c.Close()
			if _, err := c.Write(sink.AppendHello(nil, sink.Hello{Rank: r, WorldSize: 2, NumWorkers: 1})); err != nil {
				results[r] <- got{err: err}
				return
			}
			var raws [][]byte
			d := sink.NewDecoder(c)
			for {
				m, err := d.Next()
				if errors.Is(err, io.EOF) {
					results[r] <- got{raws: raws}
					return
				}
				if err != nil {
					results[r] <- got{err: err}
					return
				}
				switch m.Type {
				case sink.TypeError:
					results[r] <- got{err: fmt.Errorf("in-band error: %s", m.Error)}
					return
				case sink.TypeBatch:
					raws = append(raws, m.Raw)
				}
			}
		}()
	}
	for r := range results {
		g := <-results[r]
		if g.err != nil {
			t.Fatalf("client rank %d: %v", r, g.err)
		}
		out, errb, code := runCmd(t, append([]string{"stream", "-q", "--rank", fmt.Sprint(r), "--world-size", "2"}, common...)...)
		if code != 0 {
			t.Fatalf("stream rank %d: %s", r, errb)
		}
		want, _ := rawBatches(t, strings.NewReader(out))
		if len(want) == 0 || len(g.raws) != len(want) {
			t.Fatalf("rank %d: %d batches served with the spill, %d streamed without", r, len(g.raws), len(want))
		}
		for i := range want {
			if !bytes.Equal(g.raws[i], want[i]) {
				t.Fatalf("rank %d: batch %d differs with the spill", r, i)
			}
		}
	}
	if left, err := os.ReadDir(spill); err != nil || len(left) != 0 {
		t.Fatalf("spill directory after the clients: %v %v, want empty", left, err)
	}
}

// TestServeSpillSpace: serve's clients share the spill directory's free
// space: with room for one client's worst case and a half (a tmpfs), a
// second client connecting while the first streams is refused with an
// in-band error naming the directory and the bytes, and the first
// streams to its end unaffected.
func TestServeSpillSpace(t *testing.T) {
	sock, spill := serveSpillPaths(t)
	ds := genCameraDataset(t, filepath.Join(t.TempDir(), "cams"), 6, 30, 40, 96, 64)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	common := []string{"--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "4",
		"--cameras", "all", "--shuffle", "--seed", "9", "--shuffle-buffer", "16", "--shuffle-buffer-bytes", "0"}
	need := spillNeed(t, spill, common)
	testtmpfs.Mount(t, spill, fmt.Sprintf("size=%d", (need*3/2+4095)/4096*4096),
		"pipeline's TestSpillSpaceStreams covers the accounting with an injected free space")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		e, _, _ := genEnv()
		done <- run(ctx, e, append([]string{"serve", "-q", "--socket", sock, "--shuffle-spill", spill, "--client-buffer", "4KiB"}, common...))
	}()
	defer func() { cancel(); <-done }()
	waitSocket(t, sock)
	// The first client reads its header and stalls: its stream blocks on
	// the socket, its spill reserved.
	first, d := helloClient(t, sock)
	defer first.Close()
	if m, err := d.Next(); err != nil || m.Type != sink.TypeHeader {
		t.Fatalf("first client: %v, %v; want the header", m, err)
	}
	second, d2 := helloClient(t, sock)
	defer second.Close()
	m, err := d2.Next()
	for err == nil && m.Type != sink.TypeError {
		m, err = d2.Next()
	}
	if err != nil {
		t.Fatalf("second client: %v, want an in-band error", err)
	}
	for _, want := range []string{"shuffle spill directory " + spill, fmt.Sprintf("may grow to %d bytes", need), "the 1 other streams spilling there"} {
		if !strings.Contains(m.Error, want) {
			t.Errorf("second client's error %q does not say %q", m.Error, want)
		}
	}
	batches := 0
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("first client: %v", err)
		}
		if m.Type == sink.TypeError {
			t.Fatalf("first client: in-band error %s", m.Error)
		}
		if m.Type == sink.TypeBatch {
			batches++
		}
	}
	if batches == 0 {
		t.Fatal("first client: no batch")
	}
}

// spillNeed is the spill's worst case (pipeline.SpillBytes) of serve's
// stream of args for one consumer, with spill as --shuffle-spill.
func spillNeed(t *testing.T, spill string, args []string) int64 {
	t.Helper()
	var rf runFlags
	var bf batchFlags
	var tf trainFlags
	fs := flag.NewFlagSet("need", flag.ContinueOnError)
	rf.register(fs)
	bf.register(fs)
	tf.register(fs, nil, false)
	if err := fs.Parse(append([]string{"--shuffle-spill", spill}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := tf.validate(); err != nil {
		t.Fatal(err)
	}
	e, _, _ := genEnv()
	mix, err := rf.openMix(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	need := pipeline.SpillBytes(mix, tf.options(0, 1, 0, 1, ""))
	if need < 8192 {
		t.Fatalf("spill worst case %d bytes: too small for the test", need)
	}
	return need
}

// waitSocket waits for a server to listen on sock.
func waitSocket(t *testing.T, sock string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		if i > 500 {
			t.Fatal("no socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// helloClient connects to sock as the one consumer of a run.
func helloClient(t *testing.T, sock string) (net.Conn, *sink.Decoder) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(sink.AppendHello(nil, sink.Hello{WorldSize: 1, NumWorkers: 1})); err != nil {
		t.Fatal(err)
	}
	return c, sink.NewDecoder(c)
}

// FuzzShuffleSpillGB: --shuffle-spill-gb parses any text to an error or a
// budget: "" the default (0), 0 none (-1), else a positive number of GB
// as bytes (at least 1), never a panic or a negative or overflowed count.
func FuzzShuffleSpillGB(f *testing.F) {
	for _, s := range []string{"", "0", "64", "1.5", " 2 ", "1e-9", "1e20", "NaN", "Inf", "-3", "lots", "0x10", "9.3e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tf := trainFlags{spillGB: s}
		err := tf.parseSpillGB()
		switch g := strings.TrimSpace(s); {
		case err != nil:
			if !strings.Contains(err.Error(), "--shuffle-spill-gb") {
				t.Fatalf("%q: error %v does not name the flag", s, err)
			}
		case g == "":
			if tf.spillBudget != 0 {
				t.Fatalf("%q: budget %d, want 0 (the default)", s, tf.spillBudget)
			}
		case parsesZero(g):
			if tf.spillBudget != -1 {
				t.Fatalf("%q: budget %d, want -1 (none)", s, tf.spillBudget)
			}
		case tf.spillBudget < 1:
			t.Fatalf("%q: budget %d bytes", s, tf.spillBudget)
		}
	})
}

func parsesZero(s string) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v == 0
}
