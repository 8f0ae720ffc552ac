package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

// TestPrerenderOutStores: prerender refuses URLs it cannot write to (not
// s3:// nor hf://buckets/) before reading anything and without creating a
// local "gs:" or "http:" directory.
func TestPrerenderOutStores(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "gs://b/pre"}, "not a local directory nor an s3:// or hf://buckets/ prefix"},
		{[]string{"--finalize", "http://host/pre"}, "not a local directory nor an s3:// or hf://buckets/ prefix"},
		{[]string{"--out", "hf://buckets/lab"}, "want hf://buckets/NAMESPACE/NAME"},
	} {
		_, stderr, code := prRun(t, map[string]string{"HOME": t.TempDir()}, append([]string{"prerender", "-q"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Fatalf("%v: exit %d %s", c.args, code, stderr)
		}
	}
	for _, d := range []string{"hf:", "gs:", "http:"} {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("a local %q directory was created", d)
		}
	}
}

const bucketToken = "hf_bucketWRITEsecret0123456789"

// bucketVars is the environment of a CLI run against the fake bucket Hub
// (its own cache: another "machine" each call).
func bucketVars(t *testing.T, b *fakehub.Buckets, token string) map[string]string {
	return map[string]string{"HF_ENDPOINT": b.URL(), "HF_TOKEN": token, "HOME": t.TempDir()}
}

// bucketPrerender starts a fake bucket Hub with the bucket lab/robots (token
// bucketToken) and returns it, the environment that reaches it, and the
// prerender arguments of a conformance dataset (no --out).
func bucketPrerender(t *testing.T) (*fakehub.Buckets, map[string]string, []string) {
	b := fakehub.NewBuckets(t)
	b.Token = bucketToken
	b.AddBucket("lab/robots")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	return b, bucketVars(t, b, bucketToken), []string{"prerender", "--dataset", local, "--batch-size", "8", "--shard-size", "64KB", "-q"}
}

// TestBucketPrerender: prerender --out hf://buckets/… uploads every shard
// through the Xet protocol and registers index.json in a batch of its own
// after them; the bucket's files are the local pre-render's byte for byte;
// the same command again uploads nothing; stream --from and serve --from
// hf://buckets/… replay exactly what the local pre-render gives and verify
// passes; two ranks from two machines into one prefix are finalized
// there; a wrong token fails without printing it.
func TestBucketPrerender(t *testing.T) {
	b, vars, args := bucketPrerender(t)
	localOut := filepath.Join(t.TempDir(), "pre")
	if _, stderr, code := prRun(t, vars, append(args, "--out", localOut)...); code != 0 {
		t.Fatal(stderr)
	}
	const spec = "hf://buckets/lab/robots/sets/pre"
	if _, stderr, code := prRun(t, vars, append(args, "--out", spec)...); code != 0 {
		t.Fatal(stderr)
	}
	files := b.Files("lab/robots")
	want := prFiles(t, localOut)
	for name, data := range want {
		f, ok := files["sets/pre/"+name]
		if !ok {
			t.Fatalf("%s is not in the bucket", name)
		}
		got, err := b.Content(f.XetHash)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: the bucket's content differs (%v)", name, err)
		}
	}
	if len(files) != len(want) {
		t.Fatalf("the bucket has %d files, the pre-render %d", len(files), len(want))
	}
	batches := b.BatchLog()
	if n := len(batches); n != 2 || len(batches[1]) != 1 || batches[1][0] != "+sets/pre/"+prerender.IndexFile {
		t.Fatalf("batches %v: want the shards, then index.json alone", batches)
	}
	for _, p := range batches[0] {
		if strings.HasSuffix(p, "index.json") {
			t.Fatalf("the index was registered with the shards: %v", batches[0])
		}
	}
	again := append(append([]string{}, args[:len(args)-1]...), "--out", spec) // without -q
	if _, stderr, code := prRun(t, vars, again...); code != 0 || !strings.Contains(stderr, ": 0 files uploaded") {
		t.Fatalf("prerender again: %d %s", code, stderr)
	}
	wantOut, stderr, code := prRun(t, vars, "stream", "--from", localOut, "--format", "jsonl")
	if code != 0 {
		t.Fatal(stderr)
	}
	got, stderr, code := prRun(t, bucketVars(t, b, bucketToken), "stream", "--from", spec, "--format", "jsonl")
	if code != 0 || got != wantOut {
		t.Fatalf("the replay from the bucket differs from the local replay (exit %d) %s", code, stderr)
	}
	if out, stderr, code := prRun(t, vars, "verify", spec); code != 0 || !strings.HasPrefix(out, "OK "+spec+":") {
		t.Fatalf("verify: %d %s %s", code, out, stderr)
	}
	// serve --from hf://buckets/…: a client gets the frames a local replay streams.
	e, _, _ := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	_, sock, _ := startServerEnv(t, e, "--from", spec)
	c := dialHello(t, sock, sink.Hello{WorldSize: 1, NumWorkers: 1})
	served, _ := servedFrames(t, c)
	c.Close()
	localBin, _, _ := prRun(t, vars, "stream", "--from", localOut)
	wantFrames, _ := servedFrames(t, strings.NewReader(localBin))
	if len(served[0]) == 0 || len(served[0]) != len(wantFrames[0]) {
		t.Fatalf("serve --from %s served %d frames, the local replay %d", spec, len(served[0]), len(wantFrames[0]))
	}
	// Two ranks on two machines (own caches), one prefix; then finalize.
	const ranks = "hf://buckets/lab/robots/ranks"
	for r := range 2 {
		rargs := append(append([]string{}, args...), "--out", ranks, "--rank", string(rune('0'+r)), "--world-size", "2")
		if _, stderr, code := prRun(t, bucketVars(t, b, bucketToken), rargs...); code != 0 {
			t.Fatalf("rank %d: %s", r, stderr)
		}
	}
	if _, stderr, code := prRun(t, vars, "stream", "--from", ranks, "--format", "jsonl"); code == 0 {
		t.Fatal("replayed an unfinalized multi-rank pre-render")
	} else {
		t.Logf("before --finalize: %s", strings.TrimSpace(stderr))
	}
	if _, stderr, code := prRun(t, vars, "prerender", "--finalize", ranks, "-q"); code != 0 {
		t.Fatal(stderr)
	}
	if out, stderr, code := prRun(t, vars, "verify", ranks); code != 0 {
		t.Fatalf("verify the finalized ranks: %s %s", out, stderr)
	}
	// A wrong token: a clear error, without the token.
	_, stderr, code = prRun(t, bucketVars(t, b, "hf_wrongTOKENtext"), append(args, "--out", "hf://buckets/lab/robots/other")...)
	if code == 0 || !strings.Contains(stderr, "HF_TOKEN") || strings.Contains(stderr, "hf_wrongTOKENtext") {
		t.Fatalf("wrong token: exit %d %s", code, stderr)
	}
	t.Logf("wrong token: %s", strings.TrimSpace(stderr))
}

// TestBucketPrerenderInterrupted: a publish canceled while its xorbs are
// uploading registers nothing (no index.json, no shard); the same command
// run again completes it; a 503 storm on the CAS is retried through.
func TestBucketPrerenderInterrupted(t *testing.T) {
	b, vars, args := bucketPrerender(t)
	args = append(args, "--out", "hf://buckets/lab/robots/pre")
	b.XorbDelay = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
		done <- run(ctx, e, args)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for b.Count("xorb") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code == 0 {
		t.Fatal("the canceled publish succeeded")
	}
	if files := b.Files("lab/robots"); len(files) != 0 {
		t.Fatalf("an interrupted publish registered %d files", len(files))
	}
	b.XorbDelay = 0
	b.AddFault(&fakehub.Fault{Kind: "xorb", N: 2, Status: 503})
	if _, stderr, code := prRun(t, vars, args...); code != 0 {
		t.Fatal(stderr)
	}
	if _, ok := b.Files("lab/robots")["pre/"+prerender.IndexFile]; !ok {
		t.Fatal("no index after the resumed publish")
	}
}
