package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/sink"
)

// TestStreamAndServeFromPrerendered replays a pre-rendered directory with
// `stream --from` (byte-identical to the live stream) and `serve --from`
// (two workers covering every batch once).
func TestStreamAndServeFromPrerendered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, errb, code := runCmd(t, "prerender", "--out", dir, "--shard-size", "40KB", "--batch-size", "16", "-q"); code != 0 {
		t.Fatalf("prerender: exit %d: %s", code, errb)
	}
	live, errb, code := runCmd(t, "stream", "--batch-size", "16", "-q")
	if code != 0 {
		t.Fatalf("stream: %s", errb)
	}
	replayed, errb, code := runCmd(t, "stream", "--from", dir)
	if code != 0 {
		t.Fatalf("stream --from: %s", errb)
	}
	if replayed != live {
		t.Fatalf("replay (%d bytes) differs from the live stream (%d bytes)", len(replayed), len(live))
	}
	if _, errb, code := runCmd(t, "stream", "--from", dir, "--shuffle"); code == 0 {
		t.Fatal("--from --shuffle accepted")
	} else if errb == "" {
		t.Fatal("no message")
	}

	sockDir, _ := os.MkdirTemp("", "lrs")
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "r.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int)
	go func() {
		e, _, _ := genEnv()
		done <- run(ctx, e, []string{"serve", "--socket", sock, "--from", dir})
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
	full, err := sink.Decode(bytes.NewReader([]byte(live)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.Write(sink.AppendHello(nil, sink.Hello{Worker: w, NumWorkers: 2, WorldSize: 1}))
			st, err := sink.Decode(c)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, ix := range indexesOf(t, st) {
				seen[ix]++
			}
		}()
	}
	wg.Wait()
	want := indexesOf(t, full)
	if len(seen) != len(want) {
		t.Fatalf("workers got %d frames, the stream has %d", len(seen), len(want))
	}
	for _, ix := range want {
		if seen[ix] != 1 {
			t.Fatalf("frame %d served %d times", ix, seen[ix])
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exit %d", code)
	}
}
