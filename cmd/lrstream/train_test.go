package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/sink"
)

// rawBatches decodes a stream and returns its batch messages' bytes and
// resume tokens.
func rawBatches(t *testing.T, r io.Reader) ([][]byte, []string) {
	t.Helper()
	d := sink.NewDecoder(r)
	var raws [][]byte
	var toks []string
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			return raws, toks
		}
		if err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case sink.TypeBatch:
			raws = append(raws, m.Raw)
			toks = append(toks, m.Batch.Meta.Resume)
		case sink.TypeError:
			t.Fatalf("stream error: %s", m.Error)
		}
	}
}

// TestServeTrainingResume: a training server (shuffled, 2 epochs) serves
// ranks over the socket; a client resuming from a token gets exactly the
// rest of its uninterrupted stream.
func TestServeTrainingResume(t *testing.T) {
	dir, _ := os.MkdirTemp("", "lrs")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "t.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int)
	go func() {
		e, _, _ := genEnv()
		done <- run(ctx, e, []string{"serve", "--socket", sock, "--shuffle", "--seed", "4", "--epochs", "2", "--batch-size", "8", "--shuffle-buffer", "100"})
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 300 {
			t.Fatal("no socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fetch := func(h sink.Hello) ([][]byte, []string) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(sink.AppendHello(nil, h))
		return rawBatches(t, c)
	}
	h := sink.Hello{Rank: 1, WorldSize: 2, Worker: 0, NumWorkers: 2}
	all, toks := fetch(h)
	other, _ := fetch(sink.Hello{Rank: 0, WorldSize: 2, Worker: 1, NumWorkers: 2})
	if len(all) == 0 || len(all) != len(other) {
		t.Fatalf("consumers got %d and %d batches", len(all), len(other))
	}
	for _, cut := range []int{0, len(all) / 2, len(all) - 2} {
		h.Resume = toks[cut]
		rest, _ := fetch(h)
		if len(rest) != len(all)-cut-1 {
			t.Fatalf("cut %d: %d batches after resume, want %d", cut, len(rest), len(all)-cut-1)
		}
		for i := range rest {
			if string(rest[i]) != string(all[cut+1+i]) {
				t.Fatalf("cut %d: batch %d differs", cut, i)
			}
		}
	}
	// The same token on the CLI: rank 2 of 4 is the same consumer
	// (rank 1 × 2 workers + worker 0) of the same 4.
	out, errb, code := runCmd(t, "stream", "--shuffle", "--seed", "4", "--epochs", "2", "--batch-size", "8", "--shuffle-buffer", "100",
		"--rank", "2", "--world-size", "4", "--resume", toks[3], "-q")
	if code != 0 {
		t.Fatalf("stream --resume: exit %d: %s", code, errb)
	}
	rest, _ := rawBatches(t, strings.NewReader(out))
	if len(rest) != len(all)-4 || string(rest[0]) != string(all[4]) {
		t.Fatalf("stream --resume gave %d batches, want %d, first equal %v", len(rest), len(all)-4, len(rest) > 0 && string(rest[0]) == string(all[4]))
	}
	if _, errb, code := runCmd(t, "stream", "--resume", "bogus", "-q"); code == 0 || !strings.Contains(errb, "resume token") {
		t.Fatalf("bad token: exit %d %s", code, errb)
	}
	cancel()
	<-done
}
