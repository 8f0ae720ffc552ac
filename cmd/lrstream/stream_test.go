package main

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/sink"
)

func shared(t *testing.T, parts ...string) string { return testkit.Shared(t, parts...) }

// runCmd runs lrstream with args and returns stdout, stderr and the exit
// status.
func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	e, out, errb := genEnv()
	code := run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

// indexesOf collects the dataset indices of every batch of a stream.
func indexesOf(t *testing.T, st *sink.Stream) []int64 {
	t.Helper()
	var out []int64
	for _, b := range st.Batches {
		a, ok := b.Column("index").(*sink.Array)
		if !ok {
			t.Fatalf("batch %d has no index array", b.Meta.Seq)
		}
		for i := 0; i < b.Size; i++ {
			out = append(out, int64(uint64(a.Data[8*i])|uint64(a.Data[8*i+1])<<8|uint64(a.Data[8*i+2])<<16|uint64(a.Data[8*i+3])<<24|uint64(a.Data[8*i+4])<<32|uint64(a.Data[8*i+5])<<40|uint64(a.Data[8*i+6])<<48|uint64(a.Data[8*i+7])<<56))
		}
	}
	return out
}

// expectedKept reads an expected outcome file and returns the indices of
// the frames a stream keeps (rendered or passthrough), in order.
func expectedKept(t *testing.T, path string) []int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var f struct {
			Index   int64  `json:"index"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatal(err)
		}
		if f.Outcome == "rendered" || f.Outcome == "passthrough" {
			out = append(out, f.Index)
		}
	}
	return out
}

func TestStreamConformanceDataset(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_documented_top_wrist")
	rec := shared(t, "recipes", "subtask.yaml")
	out, errb, code := runCmd(t, "stream", "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "--batch-size", "64", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	st, err := sink.Decode(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	got := indexesOf(t, st)
	want := expectedKept(t, filepath.Join(ds, "expected", "subtask.fallback.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("stream kept %d frames, expected files keep %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("kept frame %d is index %d, want %d", i, got[i], want[i])
		}
	}
	for i, b := range st.Batches {
		if i < len(st.Batches)-1 && b.Size != 64 {
			t.Fatalf("batch %d has %d samples", i, b.Size)
		}
	}
	if st.End.Errors == 0 || st.End.Samples != int64(len(want)) {
		t.Fatalf("end counts %+v", st.End)
	}
	// Same bytes whatever the worker count.
	out1, _, _ := runCmd(t, "stream", "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "--batch-size", "64", "-q", "--workers", "1")
	if out1 != out {
		t.Fatal("output differs between --workers 1 and the default")
	}
}

func TestStreamDefaultsToDemo(t *testing.T) {
	out, errb, code := runCmd(t, "stream", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	st, err := sink.Decode(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if st.Header.Dataset != "lrstream-demo" || st.End.Frames == 0 || st.End.Rendered == 0 || len(st.Batches) == 0 {
		t.Fatalf("header %+v end %+v", st.Header, st.End)
	}
}

func TestStreamErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("blend: {}\n"), 0o644)
	// Flag syntax errors print usage and write nothing to stdout; failures
	// once the flags parsed (dataset metadata, recipe, selection) are also
	// written to stdout as a lone in-band error message (wire-format.md).
	for _, tc := range []struct {
		args   []string
		want   string
		inBand bool
	}{
		{[]string{"stream", "--bogus"}, "unknown flag --bogus", false},
		{[]string{"stream", "--dataset", filepath.Join(dir, "nope"), "--recipe", bad}, "", true},
		{[]string{"stream", "--recipe", bad}, "at least one component", true},
		{[]string{"stream", "--mode", "weird"}, "unknown mode", true},
		{[]string{"stream", "--batch-size", "0"}, "--batch-size", false},
		{[]string{"stream", "--episodes", "x-y"}, "x-y", true},
		{[]string{"stream", "--episodes", "100-200"}, "matches none", true},
		{[]string{"stream", "--features", "observation.images.front"}, "not decoded", true},
		{[]string{"stream", "--format", "jsonl", "--mode", "weird"}, "unknown mode", true},
		{[]string{"serve", "--socket", bad}, "not a socket", false},
	} {
		out, errb, code := runCmd(t, tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", tc.args)
		}
		if !strings.Contains(errb, tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errb, tc.want)
		}
		if !tc.inBand {
			if out != "" {
				t.Errorf("%v: wrote %d bytes to stdout", tc.args, len(out))
			}
			continue
		}
		var msg string
		if slices.Contains(tc.args, "jsonl") {
			var m struct{ Type, Message string }
			if err := json.Unmarshal([]byte(out), &m); err != nil || m.Type != "error" || strings.Count(out, "\n") != 1 {
				t.Errorf("%v: stdout %q is not one JSON error line", tc.args, out)
			}
			msg = m.Message
		} else {
			st, err := sink.Decode(strings.NewReader(out))
			var se *sink.StreamError
			if !errors.As(err, &se) || st.Header != nil {
				t.Errorf("%v: stdout is not a lone error message: %v", tc.args, err)
				continue
			}
			msg = se.Message
		}
		if !strings.Contains(msg, tc.want) || !strings.Contains(errb, msg) {
			t.Errorf("%v: in-band error %q, stderr %q", tc.args, msg, errb)
		}
	}
	// The socket-path check must not have touched the file.
	if b, _ := os.ReadFile(bad); string(b) != "blend: {}\n" {
		t.Fatal("serve modified a non-socket file")
	}
}

func TestInspectJSONLMatchesExpected(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist")
	rec := shared(t, "recipes", "subtask_mem_vqa_speech.yaml")
	out, errb, code := runCmd(t, "inspect", "--dataset", ds, "--recipe", rec, "--jsonl", "--mode", "fallback", "--no-task-aug")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	want, _ := os.ReadFile(filepath.Join(ds, "expected", "subtask_mem_vqa_speech.step.jsonl"))
	gl := strings.Split(strings.TrimSpace(out), "\n")
	wl := strings.Split(strings.TrimSpace(string(want)), "\n")
	if len(gl) != len(wl) {
		t.Fatalf("%d lines, want %d", len(gl), len(wl))
	}
	for i := range gl {
		var g, w any
		json.Unmarshal([]byte(gl[i]), &g)
		json.Unmarshal([]byte(wl[i]), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if !bytes.Equal(gb, wb) {
			t.Fatalf("line %d:\n got %s\nwant %s", i, gl[i], wl[i])
		}
	}
	// The readable view summarises outcomes and blend choices.
	out, _, code = runCmd(t, "inspect", "--dataset", ds, "--recipe", rec)
	for _, want := range []string{"frames 604", "blend components chosen", "low_level_execution", "errors:", "Ambiguous resolver"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("inspect view lacks %q (exit %d):\n%s", want, code, out)
		}
	}
}

func TestServeSharesCoverDatasetOnce(t *testing.T) {
	dir, err := os.MkdirTemp("", "lrs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ds := shared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	rec := shared(t, "recipes", "subtask_mem.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		e, _, _ := genEnv()
		done <- run(ctx, e, []string{"serve", "--socket", sock, "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "--batch-size", "16"})
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 200 {
			t.Fatal("socket never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _ := os.Stat(sock); st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", st.Mode().Perm())
	}
	const n = 3
	var wg sync.WaitGroup
	streams := make([]*sink.Stream, n)
	errs := make([]error, n)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			c.Write(sink.AppendHello(nil, sink.Hello{Worker: w, NumWorkers: n, WorldSize: 1}))
			streams[w], errs[w] = sink.Decode(c)
		}()
	}
	// A client that disconnects mid-stream does not disturb the others.
	if c, err := net.Dial("unix", sock); err == nil {
		c.Write(sink.AppendHello(nil, sink.Hello{Worker: 0, NumWorkers: 1, WorldSize: 1}))
		buf := make([]byte, 100)
		c.Read(buf)
		c.Close()
	}
	wg.Wait()
	seen := map[int64]int{}
	for w := 0; w < n; w++ {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		if streams[w].Header.Share.Worker != w {
			t.Fatalf("worker %d got header share %+v", w, streams[w].Header.Share)
		}
		for _, ix := range indexesOf(t, streams[w]) {
			seen[ix]++
		}
		if len(streams[w].Batches) == 0 {
			t.Fatalf("worker %d got no batches", w)
		}
	}
	want := expectedKept(t, filepath.Join(ds, "expected", "subtask_mem.fallback.jsonl"))
	if len(seen) != len(want) {
		t.Fatalf("workers together got %d distinct frames, want %d", len(seen), len(want))
	}
	for _, ix := range want {
		if seen[ix] != 1 {
			t.Fatalf("frame %d served %d times", ix, seen[ix])
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("socket file left behind")
	}
}

// TestStreamHubOfflineColdCache: a Hub dataset in offline mode with an
// empty cache fails with a clear error (on stderr, and in-band on stdout).
func TestStreamHubOfflineColdCache(t *testing.T) {
	cache := t.TempDir()
	vars := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache, "HF_HOME": cache, "HF_TOKEN": "hf_secret_token_value"}
	e, out, errb := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	rec := shared(t, "recipes", "subtask.yaml")
	code := run(context.Background(), e, []string{"stream", "--dataset", "someorg/somedata@main", "--recipe", rec})
	// stdout holds the same failure as a lone in-band error message.
	if m, lone := loneError(out.String()); code == 0 || !lone || !strings.Contains(m, "someorg/somedata") || strings.Contains(m, "hf_secret") {
		t.Fatalf("exit %d, %d bytes on stdout (%q)", code, out.Len(), m)
	}
	msg := errb.String()
	if !strings.Contains(msg, "someorg/somedata") || !strings.Contains(strings.ToLower(msg), "offline") {
		t.Fatalf("unclear error: %s", msg)
	}
	if strings.Contains(msg, "hf_secret_token_value") {
		t.Fatal("token in the error message")
	}
}

// warmCache lays dataset dir out as a huggingface_hub cache entry for
// repo id under cache, at commit sha, and returns the cache root.
func warmCache(t *testing.T, dir, id, sha string) string {
	t.Helper()
	cache := t.TempDir()
	repo := filepath.Join(cache, "datasets--"+strings.ReplaceAll(id, "/", "--"))
	for _, d := range []string{"blobs", "refs", filepath.Join("snapshots", sha)} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(sha), 0o644)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "expected") || strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, "generation.json") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		blob := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(repo, "blobs", blob), data, 0o644); err != nil {
			return err
		}
		link := filepath.Join(repo, "snapshots", sha, rel)
		os.MkdirAll(filepath.Dir(link), 0o755)
		target, _ := filepath.Rel(filepath.Dir(link), filepath.Join(repo, "blobs", blob))
		return os.Symlink(target, link)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cache
}

// TestStreamHubOfflineWarmCache streams a Hub dataset from a warm
// huggingface_hub cache (as Python tools leave it) with HF_HUB_OFFLINE=1:
// the batches equal those of the local copy, and the header carries the
// resolved commit.
func TestStreamHubOfflineWarmCache(t *testing.T) {
	ds := shared(t, "conformance", "datasets", "pub_jsonext_front_wrist")
	sha := strings.Repeat("ab12", 10)
	cache := warmCache(t, ds, "lerobot-test/jsonext", sha)
	vars := map[string]string{"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}
	e, out, errb := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	args := []string{"--recipe", shared(t, "recipes", "subtask_mem.yaml"), "--mode", "fallback", "--on-error", "skip", "-q"}
	if code := run(context.Background(), e, append([]string{"stream", "--dataset", "lerobot-test/jsonext"}, args...)); code != 0 {
		t.Fatalf("hub stream: exit %d: %s", code, errb)
	}
	local, errl, code := runCmd(t, append([]string{"stream", "--dataset", ds}, args...)...)
	if code != 0 {
		t.Fatal(errl)
	}
	hub, err := sink.Decode(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := sink.Decode(strings.NewReader(local))
	if hub.Header.Revision != sha || hub.Header.Dataset != "lerobot-test/jsonext" {
		t.Fatalf("header dataset %q revision %q", hub.Header.Dataset, hub.Header.Revision)
	}
	hr, _ := rawBatches(t, strings.NewReader(out.String()))
	lr, _ := rawBatches(t, strings.NewReader(local))
	if len(hr) != len(lr) || len(hr) == 0 || !reflect.DeepEqual(hub.End, loc.End) {
		t.Fatalf("hub %d batches, local %d", len(hr), len(lr))
	}
	for i := range hr {
		if string(hr[i]) != string(lr[i]) {
			t.Fatalf("batch %d differs between the Hub cache and the local copy", i)
		}
	}
}

// TestStreamRankHeaderShare checks that `stream --rank R --world-size W`
// names rank R of W in the header's share map (global and partitioned
// orders), as `stream --from` and the socket hello do.
func TestStreamRankHeaderShare(t *testing.T) {
	for _, args := range [][]string{
		{"stream", "--world-size", "2", "--rank", "1", "-q"},
		{"stream", "--world-size", "2", "--rank", "1", "--order", "partitioned", "--partitions", "4", "-q"},
		{"stream", "--world-size", "2", "--rank", "1", "--shuffle", "--epochs", "2", "-q"},
	} {
		out, errb, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		st, err := sink.Decode(strings.NewReader(out))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		want := sink.Share{Rank: 1, WorldSize: 2, Worker: 0, NumWorkers: 1}
		if st.Header.Share != want {
			t.Errorf("%v: header share %+v, want %+v", args, st.Header.Share, want)
		}
	}
}
