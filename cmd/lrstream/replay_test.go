package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	live, errb, code := runCmd(t, "stream", "--batch-size", "16", "-q", "--cameras", "none") // prerender's default
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
	// Flags replay cannot honour are refused, named.
	for _, args := range [][]string{
		{"stream", "--from", dir, "--batch-size", "8"},
		{"stream", "--from", dir, "--dataset", "x", "--keep-language"},
		{"serve", "--socket", filepath.Join(t.TempDir(), "s"), "--from", dir, "--recipe", "r.yaml"},
	} {
		out, errb, code := runCmd(t, args...)
		if code == 0 || out != "" {
			t.Fatalf("%v: exit %d, %d bytes out", args, code, len(out))
		}
		for _, a := range args[3:] {
			if strings.HasPrefix(a, "--") && !strings.Contains(errb, "cannot honour") || strings.HasPrefix(a, "--") && !strings.Contains(errb, a) {
				t.Fatalf("%v: stderr %q does not name %s", args, errb, a)
			}
		}
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

// TestReplayTrainingFlags: `stream --from` honours --epochs, --shuffle,
// --seed and --resume (exact continuation, also through serve's hello),
// writes --format jsonl, and previews readably.
func TestReplayTrainingFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, errb, code := runCmd(t, "prerender", "--out", dir, "--shard-size", "40KB", "--batch-size", "16", "-q"); code != 0 {
		t.Fatalf("prerender: exit %d: %s", code, errb)
	}
	args := []string{"stream", "--from", dir, "--shuffle", "--seed", "3", "--epochs", "2"}
	full, errb, code := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("%v: %s", args, errb)
	}
	msgs := splitStream(t, full)
	batches := msgs[1 : len(msgs)-1]
	if len(batches) < 4 {
		t.Fatalf("%d batches", len(batches))
	}
	cut := len(batches) / 2
	tok := batches[cut].Batch.Meta.Resume
	rest, errb, code := runCmd(t, append(args, "--resume", tok)...)
	if code != 0 {
		t.Fatalf("resume: %s", errb)
	}
	rmsgs := splitStream(t, rest)
	if len(rmsgs)-2 != len(batches)-cut-1 {
		t.Fatalf("resumed: %d batches, want %d", len(rmsgs)-2, len(batches)-cut-1)
	}
	for i, m := range rmsgs[1 : len(rmsgs)-1] {
		if !bytes.Equal(m.Raw, batches[cut+1+i].Raw) {
			t.Fatalf("resumed batch %d differs", i)
		}
	}
	// A token of another seed is refused in-band.
	out, _, code := runCmd(t, "stream", "--from", dir, "--shuffle", "--seed", "4", "--epochs", "2", "--resume", tok)
	if _, err := sink.Decode(strings.NewReader(out)); code == 0 || err == nil || !strings.Contains(err.Error(), "another replay") {
		t.Fatalf("other seed: exit %d, %v", code, err)
	}

	// --format jsonl: one JSON line per message.
	jl, errb, code := runCmd(t, "stream", "--from", dir, "--format", "jsonl")
	if code != 0 {
		t.Fatalf("jsonl: %s", errb)
	}
	plain, _, _ := runCmd(t, "stream", "--from", dir)
	lines := strings.Split(strings.TrimSuffix(jl, "\n"), "\n")
	if pm := splitStream(t, plain); len(lines) != len(pm) {
		t.Fatalf("jsonl: %d lines for %d messages", len(lines), len(pm))
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["type"] == nil {
			t.Fatalf("jsonl line %d: %v", i, err)
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"type":"end"`) {
		t.Fatalf("last line %s", lines[len(lines)-1])
	}

	// The preview (what a terminal gets).
	var pv bytes.Buffer
	c := newConverter(&pv, (&replayPreview{}).line)
	c.Write([]byte(plain))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := pv.String(); !strings.Contains(s, "replay: dataset") || !strings.Contains(s, "batch 0 (epoch 0)") || !strings.Contains(s, "end: ") {
		t.Fatalf("preview:\n%s", s)
	}

	// serve --from: the token resumes through the hello.
	_, sock, _ := startServer(t, "--from", dir, "--shuffle", "--seed", "3", "--epochs", "2")
	conn := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1, Resume: tok})
	var got bytes.Buffer
	if _, err := got.ReadFrom(conn); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	smsgs := splitStream(t, got.String())
	if len(smsgs) != len(rmsgs) {
		t.Fatalf("serve resume: %d messages, stream %d", len(smsgs), len(rmsgs))
	}
	for i := 1; i < len(smsgs)-1; i++ {
		if !bytes.Equal(smsgs[i].Raw, rmsgs[i].Raw) {
			t.Fatalf("serve resume: batch %d differs from stream --resume", i)
		}
	}
}

// splitStream decodes every message of a complete stream.
func splitStream(t *testing.T, s string) []*sink.Message {
	t.Helper()
	d := sink.NewDecoder(strings.NewReader(s))
	var out []*sink.Message
	for {
		m, err := d.Next()
		if err != nil {
			t.Fatalf("message %d: %v", len(out), err)
		}
		out = append(out, m)
		if m.Type == sink.TypeEnd || m.Type == sink.TypeError {
			return out
		}
	}
}

// TestReplayResumesItsOwnTokens: every resume token a plain replay of a
// training pre-render carries (the live stream's, as stored) resumes that
// replay: `stream --from DIR --resume TOKEN` continues with exactly the
// batches that followed it (issue 24 item 4); tokens of other runs and
// replay options the token cannot honour are refused.
func TestReplayResumesItsOwnTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, errb, code := runCmd(t, "prerender", "--out", dir, "--shard-size", "40KB", "--batch-size", "100", "--shuffle", "--epochs", "2", "-q"); code != 0 {
		t.Fatalf("prerender: exit %d: %s", code, errb)
	}
	plain, errb, code := runCmd(t, "stream", "--from", dir)
	if code != 0 {
		t.Fatalf("stream --from: %s", errb)
	}
	st, err := sink.Decode(strings.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	n := len(st.Batches)
	if n != 24 {
		t.Fatalf("%d batches, want 24", n)
	}
	for _, k := range []int{0, 5, 11, 12, 22, n - 1} { // epoch 0's last batch is 11
		tok := st.Batches[k].Meta.Resume
		if tok == "" {
			t.Fatalf("batch %d carries no resume token", k)
		}
		out, errb, code := runCmd(t, "stream", "--from", dir, "--resume", tok)
		if code != 0 {
			t.Fatalf("resume after batch %d: exit %d: %s", k, code, errb)
		}
		got, err := sink.Decode(strings.NewReader(out))
		if err != nil {
			t.Fatalf("resume after batch %d: %v", k, err)
		}
		if len(got.Batches) != n-k-1 || got.End == nil || got.End.Batches != int64(n-k-1) {
			t.Fatalf("resume after batch %d: %d batches (end %+v), want %d", k, len(got.Batches), got.End, n-k-1)
		}
		for i, b := range got.Batches {
			w := st.Batches[k+1+i]
			if b.Meta != w.Meta || !slices.Equal(indexesOfBatch(t, b), indexesOfBatch(t, w)) {
				t.Fatalf("resume after batch %d: batch %d is %+v, want %+v", k, i, b.Meta, w.Meta)
			}
		}
	}
	// serve --from: a client's hello resumes with the same tokens.
	_, sock, _ := startServer(t, "--from", dir)
	for _, k := range []int{4, 11} {
		c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1, Resume: st.Batches[k].Meta.Resume})
		got, err := sink.Decode(c)
		c.Close()
		if err != nil || len(got.Batches) != n-k-1 || got.Batches[0].Meta != st.Batches[k+1].Meta {
			t.Fatalf("serve --from, resume after batch %d: %v, %d batches", k, err, len(got.Batches))
		}
	}
	tok := st.Batches[3].Meta.Resume
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--resume", st.Batches[4].Meta.Resume[:10] + "x" + st.Batches[4].Meta.Resume[11:]}, "resume token"},
		{[]string{"--resume", tok, "--shuffle"}, "without --shuffle, --epochs"},
		{[]string{"--resume", tok, "--epochs", "3"}, "without --shuffle, --epochs"},
	} {
		out, errb, code := runCmd(t, append([]string{"stream", "--from", dir}, tc.args...)...)
		if code == 0 || !strings.Contains(errb, tc.want) || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout %q: want an error (in-band too) with %q", tc.args, code, errb, out, tc.want)
		}
	}
	// A directory pre-rendered without training options has no tokens:
	// a live token is refused, saying so.
	flat := filepath.Join(t.TempDir(), "flat")
	if _, errb, code := runCmd(t, "prerender", "--out", flat, "--batch-size", "100", "-q"); code != 0 {
		t.Fatalf("prerender: %s", errb)
	}
	if _, errb, code := runCmd(t, "stream", "--from", flat, "--resume", tok); code == 0 || !strings.Contains(errb, "pre-rendered without --shuffle/--epochs") {
		t.Errorf("live token on a plain pre-render: exit %d, stderr %q", code, errb)
	}
}

// indexesOfBatch returns a batch's dataset indices.
func indexesOfBatch(t *testing.T, b *sink.DecodedBatch) []int64 {
	return indexesOf(t, &sink.Stream{Batches: []*sink.DecodedBatch{b}})
}
