package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/sink"
)

// TestShuffleSpillFlag: --shuffle-spill (or LRSTREAM_SHUFFLE_SPILL)
// streams the same bytes as holding the frames in memory, leaves nothing
// in its directory, and a directory that does not exist is a usage error.
func TestShuffleSpillFlag(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: ffmpeg not found: %v", err)
		}
		t.Skipf("ffmpeg not found: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "cams")
	// 96×64 cameras: a sample's frames are large enough (32 KiB) to be
	// held in an array of their own, which is what spills.
	o := datagen.Options{Episodes: 3, MinFrames: 8, MaxFrames: 12, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		Videos: true, VideoWidth: 96, VideoHeight: 64, Workers: 1}
	if _, err := datagen.Generate(context.Background(), ds, o); err != nil {
		t.Fatal(err)
	}
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
	}{
		{name: "flag", flags: []string{"--shuffle-spill", spill}},
		{name: "environment", vars: map[string]string{shuffleSpillEnv: spill}},
		{name: "flag over environment", vars: map[string]string{shuffleSpillEnv: missing}, flags: []string{"--shuffle-spill", spill}},
		{name: "missing directory", flags: []string{"--shuffle-spill", missing}, fail: "--shuffle-spill"},
		{name: "not a directory", flags: []string{"--shuffle-spill", recipe}, fail: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errb, code := runEnv(tc.vars, tc.flags...)
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

// TestServeShuffleSpill: serve --shuffle-spill gives each client its own
// spill file (two clients at once here) and the batches `stream` gives
// the same consumer without a spill.
func TestServeShuffleSpill(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_FFMPEG") != "" {
			t.Fatalf("CI: ffmpeg not found: %v", err)
		}
		t.Skipf("ffmpeg not found: %v", err)
	}
	ds := filepath.Join(t.TempDir(), "cams")
	o := datagen.Options{Episodes: 4, MinFrames: 8, MaxFrames: 12, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		Videos: true, VideoWidth: 96, VideoHeight: 64, Workers: 1}
	if _, err := datagen.Generate(context.Background(), ds, o); err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	common := []string{"--dataset", ds, "--recipe", recipe, "--mode", "fallback", "--batch-size", "4",
		"--cameras", "all", "--shuffle", "--seed", "9", "--shuffle-buffer", "16", "--shuffle-buffer-bytes", "0"}
	dir, err := os.MkdirTemp("", "lrs") // a short path: unix socket names are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock, spill := filepath.Join(dir, "s.sock"), filepath.Join(dir, "spill")
	if err := os.Mkdir(spill, 0o700); err != nil {
		t.Fatal(err)
	}
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
