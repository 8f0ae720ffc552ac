package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/internal/s3test"
	"github.com/lrstream/lrstream/sink"
)

// s3Vars is the environment of a CLI run against srv's endpoint (or a
// proxy's), with a private home (cache) directory.
func s3Vars(t *testing.T, srv *s3test.Server, endpoint string, extra ...string) map[string]string {
	t.Helper()
	vars := srv.Env()
	vars["AWS_ENDPOINT_URL"] = endpoint
	vars["HOME"] = t.TempDir()
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	return vars
}

// jsonlBody is a jsonl stream without its header line.
func jsonlBody(t *testing.T, out string) (header map[string]any, body string) {
	t.Helper()
	first, rest, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(first), &header); err != nil || header["type"] != "header" {
		t.Fatalf("no header line: %.200q", first)
	}
	return header, rest
}

// TestS3StreamMatchesLocal: a dataset in an S3-compatible store streams
// the same batches as its local copy, in both download modes; the header
// names the s3:// prefix and the pins' digest.
func TestS3StreamMatchesLocal(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	files := srv.PutDir("lrstream-cli", "ds", local)
	args := []string{"stream", "--format", "jsonl", "--batch-size", "4"}
	want, stderr, code := prRun(t, nil, append(args, "--dataset", local)...)
	if code != 0 {
		t.Fatalf("local: %s", stderr)
	}
	_, wantBody := jsonlBody(t, want)
	for _, mode := range []string{"full", "none"} {
		vars := s3Vars(t, srv, srv.Endpoint)
		got, stderr, code := prRun(t, vars, append(args, "--dataset", "s3://lrstream-cli/ds", "--download", mode)...)
		if code != 0 {
			t.Fatalf("%s: %s", mode, stderr)
		}
		h, body := jsonlBody(t, got)
		if body != wantBody {
			t.Fatalf("--download %s: the batches differ from the local copy's", mode)
		}
		if h["dataset"] != "s3://lrstream-cli/ds" || len(h["revision"].(string)) != 40 {
			t.Fatalf("header dataset %v revision %v", h["dataset"], h["revision"])
		}
		checkHeaderPins(t, h, local, len(files))
		if strings.Contains(got, s3test.SecretKey) || strings.Contains(stderr, s3test.SecretKey) {
			t.Fatal("the secret key reached the output")
		}
	}
	// lrstream validate reads the store like a local directory.
	if out, stderr, code := prRun(t, s3Vars(t, srv, srv.Endpoint), "validate", "s3://lrstream-cli/ds"); code != 0 {
		t.Fatalf("validate: %d %s %s", code, out, stderr)
	}
	// In a mixture: s3://…:WEIGHT beside a local directory.
	mixed, stderr, code := prRun(t, s3Vars(t, srv, srv.Endpoint), "stream", "--format", "jsonl", "--batch-size", "4",
		"--dataset", local+":1", "--dataset", "s3://lrstream-cli/ds:2")
	if code != 0 {
		t.Fatalf("mixture: %s", stderr)
	}
	h, _ := jsonlBody(t, mixed)
	if ds, _ := h["dataset"].(string); !strings.Contains(ds, "s3://lrstream-cli/ds") || strings.Contains(ds, ":2") {
		t.Fatalf("mixture header dataset %q", ds)
	}
}

// checkHeaderPins checks a jsonl header's pins of s3://lrstream-cli/ds,
// a copy of local with objects objects: the revision, every file's size
// and ETag (the MD5 of the local file), the metadata and data files among
// them.
func checkHeaderPins(t *testing.T, h map[string]any, local string, objects int) {
	t.Helper()
	list, _ := h["pins"].([]any)
	if len(list) != 1 {
		t.Fatalf("header pins %v", h["pins"])
	}
	p, _ := list[0].(map[string]any)
	if p["dataset"] != "s3://lrstream-cli/ds" || p["revision"] != h["revision"] || p["hash"] != "etag" || p["objects"] != float64(objects) {
		t.Fatalf("header pins dataset %v revision %v hash %v objects %v (want %d)", p["dataset"], p["revision"], p["hash"], p["objects"], objects)
	}
	dirs, _ := p["files"].(map[string]any)
	seen := map[string]bool{}
	for dir, fs := range dirs {
		for _, f := range fs.([]any) {
			e := f.([]any)
			name := dir + "/" + e[0].(string)
			b, err := os.ReadFile(filepath.Join(local, filepath.FromSlash(name)))
			if err != nil || e[1] != float64(len(b)) || e[2] != fmt.Sprintf("%x", md5.Sum(b)) {
				t.Fatalf("pin of %s: %v (local: %d bytes, %v)", name, e, len(b), err)
			}
			seen[name] = true
		}
	}
	if !seen["meta/info.json"] || !seen["meta/tasks.parquet"] || !seen["data/chunk-002/file-000.parquet"] || seen["README.md"] || seen["generation.json"] {
		t.Fatalf("pinned files %v", seen)
	}
}

// TestS3PartitionedBytes measures, through a counting proxy, the bytes 4
// consumers of --order partitioned read from the store with --download
// none (one node: one cache directory, footers once): row-group bytes in
// all ≈ one consumer's (1×), each consumer about a quarter.
func TestS3PartitionedBytes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(ctx, dir, datagen.Options{Episodes: 64, MinFrames: 40, MaxFrames: 60,
		FramesPerFile: 800, Cameras: []string{}, Dim: 6, Tasks: 3, Seed: 2, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	tails := map[string]int64{} // data file → first byte of its footer
	filepath.WalkDir(filepath.Join(dir, "data"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		tails["/lrstream-cli/ds/"+filepath.ToSlash(rel)] = int64(len(b)) - int64(binary.LittleEndian.Uint32(b[len(b)-8:])) - 8
		return nil
	})
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	srv.PutDir("lrstream-cli", "ds", dir)
	px := s3test.NewProxy(t, srv.Endpoint)
	// rowGroupBytes is what the proxy served of the data files outside
	// footer fetches (a span reaching into a footer is one).
	rowGroupBytes := func() (data, footer int64) {
		for p, spans := range px.Spans() {
			from, ok := tails[p]
			if !ok {
				continue
			}
			for _, s := range spans {
				if s.Off+s.Len > from {
					footer += s.Len
				} else {
					data += s.Len
				}
			}
		}
		px.Reset()
		return data, footer
	}
	args := []string{"stream", "--dataset", "s3://lrstream-cli/ds", "--download", "none", "--order", "partitioned", "--partitions", "16",
		"--shuffle", "--seed", "1", "--batch-size", "4", "--workers", "1"}
	consume := func(vars map[string]string, rank, world string) (int64, int64) {
		vars["RANK"], vars["WORLD_SIZE"] = rank, world
		px.Reset()
		out, stderr, code := prRun(t, vars, args...)
		if code != 0 || len(out) == 0 {
			t.Fatalf("rank %s of %s: %s", rank, world, stderr)
		}
		return rowGroupBytes()
	}
	// A plain pass (no training order): the projected columns once.
	px.Reset()
	if _, stderr, code := prRun(t, s3Vars(t, srv, px.URL), "stream", "--dataset", "s3://lrstream-cli/ds", "--download", "none",
		"--batch-size", "4", "--workers", "1"); code != 0 {
		t.Fatal(stderr)
	}
	plain, _ := rowGroupBytes()
	one, oneFooter := consume(s3Vars(t, srv, px.URL), "0", "1")
	node := s3Vars(t, srv, px.URL) // one cache for the 4 consumers
	var all, most, footers int64
	for r := range 4 {
		d, f := consume(node, string(rune('0'+r)), "4")
		all += d
		most = max(most, d)
		footers += f
	}
	t.Logf("plain pass: %d row-group bytes; one consumer: %d (%.2f× the plain pass), %d footer bytes; 4 consumers: %d in all (%.2f×), at most %d each (%.3f×), %d footer bytes",
		plain, one, float64(one)/float64(plain), oneFooter, all, float64(all)/float64(plain), most, float64(most)/float64(plain), footers)
	if r := float64(one) / float64(plain); r < 0.98 || r > 1.02 {
		t.Errorf("one partitioned consumer reads %.3f× the plain pass's row-group bytes", r)
	}
	// Partitions hold whole global batches: each of the P-1 edges may split an
	// episode, whose row group (one per episode here) both neighbours read —
	// at most (1 + (P-1)/E)× in all (docs/training.md; 1.23× for P 16 of 64
	// episodes), and a quarter plus two edges' episodes a consumer.
	const P, E = 16, 64
	if float64(all) > (1+1.1*float64(P-1)/E)*float64(one) {
		t.Errorf("4 consumers read %d row-group bytes in all, one consumer %d", all, one)
	}
	if float64(most) > 1.5*float64(one)/4*(1+2*float64(P)/E) {
		t.Errorf("a consumer read %d row-group bytes, a quarter of one consumer's is %d", most, one/4)
	}
	if footers > oneFooter {
		t.Errorf("4 consumers of one node fetched %d footer bytes, one consumer %d: footers more than once per node", footers, oneFooter)
	}
}

// TestS3Resume: a shuffled two-epoch stream from the store resumes from a
// batch's token exactly; after an object changes, the token is refused.
func TestS3Resume(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	files := srv.PutDir("lrstream-cli", "ds", local)
	vars := s3Vars(t, srv, srv.Endpoint)
	args := []string{"stream", "--dataset", "s3://lrstream-cli/ds", "--format", "jsonl", "--batch-size", "4", "--shuffle", "--seed", "3", "--epochs", "2"}
	full, stderr, code := prRun(t, vars, args...)
	if code != 0 {
		t.Fatal(stderr)
	}
	lines := batchLines(t, full)
	k := len(lines) / 2
	var b struct {
		Resume string `json:"resume"`
	}
	if err := json.Unmarshal([]byte(lines[k-1]), &b); err != nil || b.Resume == "" {
		t.Fatalf("batch %d has no resume token: %v", k-1, err)
	}
	rest, stderr, code := prRun(t, vars, append(args, "--resume", b.Resume)...)
	if code != 0 {
		t.Fatal(stderr)
	}
	if got := batchLines(t, rest); strings.Join(got, "\n") != strings.Join(lines[k:], "\n") {
		t.Fatalf("the resumed stream is not the rest of the full one: %d batches, want %d", len(got), len(lines)-k)
	}
	// An object changes before the resume: the pins' digest (the
	// revision, in the fingerprint) changes, and the token is refused,
	// naming the object with its old and new size and ETag (the listing
	// of the token's run is in the cache's history).
	changed, oldData := "", []byte(nil)
	for n := range files {
		if strings.HasPrefix(n, "data/") {
			changed = n
			oldData, _ = os.ReadFile(filepath.Join(local, filepath.FromSlash(n)))
			break
		}
	}
	newData := append(bytes.Clone(oldData), 0)
	srv.Put("lrstream-cli", "ds/"+changed, newData)
	srv.Put("lrstream-cli", "ds/meta/extra.json", []byte("{}"))
	wantMsg := []string{"belongs to a run of another version of the dataset", "s3://lrstream-cli/ds changed since revision", "2 objects differ",
		fmt.Sprintf("%s changed (size %d, ETag %x, now size %d, ETag %x)", changed, len(oldData), md5.Sum(oldData), len(newData), md5.Sum(newData)),
		"meta/extra.json added (size 2, ETag " + fmt.Sprintf("%x", md5.Sum([]byte("{}")))}
	_, stderr, code = prRun(t, vars, append(args, "--resume", b.Resume)...)
	for _, w := range wantMsg {
		if code == 0 || !strings.Contains(stderr, w) {
			t.Fatalf("resume after a change: exit %d, %q does not say %q", code, stderr, w)
		}
	}
	t.Logf("resume after a change: %s", strings.TrimSpace(stderr))
	// A token of a run that differs by more than the dataset (another
	// seed) is refused as before, without a story about objects.
	other := append(append([]string{}, args...), "--resume", b.Resume)
	other[len(args)-3] = "4" // --seed 4
	if _, stderr, code := prRun(t, vars, other...); code == 0 || !strings.Contains(stderr, "resume token belongs to a different run") || strings.Contains(stderr, "changed since") {
		t.Fatalf("resume with another seed: exit %d %s", code, stderr)
	}
	// serve: a server started after the change refuses the client's token
	// in-band, with the same explanation.
	e, _, _ := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	_, sock, _ := startServerEnv(t, e, "--dataset", "s3://lrstream-cli/ds", "--batch-size", "4", "--shuffle", "--seed", "3", "--epochs", "2")
	// A token and a position (a client checkpoint: epoch, next and the
	// run's fingerprint, from the old stream's header).
	h, _ := jsonlBody(t, full)
	fp, _ := h["training"].(map[string]any)["fingerprint"].(string)
	for _, hello := range []sink.Hello{
		{WorldSize: 1, NumWorkers: 1, Resume: b.Resume},
		{WorldSize: 1, NumWorkers: 1, Position: &sink.Position{Epoch: 1, Next: 2, Fingerprint: fp}},
	} {
		c := dialHello(t, sock, hello)
		m, err := sink.NewDecoder(c).Next()
		c.Close()
		if err != nil || m.Type != "error" {
			t.Fatalf("serve resume after a change (%+v): %v %+v", hello, err, m)
		}
		for _, w := range wantMsg[1:] {
			if !strings.Contains(m.Error, w) || !strings.Contains(m.Error, "belongs to a run of another version of the dataset") {
				t.Fatalf("serve resume after a change (%+v): %q does not say %q", hello, m.Error, w)
			}
		}
	}
}

// TestS3PrerenderChanged: a pre-render of a dataset in the store, run
// again into the same directory after an object changed, is refused naming
// the object.
func TestS3PrerenderChanged(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	srv.PutDir("lrstream-cli", "ds", local)
	vars := s3Vars(t, srv, srv.Endpoint)
	out := filepath.Join(t.TempDir(), "pre")
	args := []string{"prerender", "--dataset", "s3://lrstream-cli/ds", "--batch-size", "8", "--out", out, "-q"}
	if _, stderr, code := prRun(t, vars, args...); code != 0 {
		t.Fatal(stderr)
	}
	info, _ := os.ReadFile(filepath.Join(local, "meta", "info.json"))
	srv.Put("lrstream-cli", "ds/meta/info.json", append(bytes.Clone(info), ' '))
	_, stderr, code := prRun(t, vars, args...)
	want := "objects: s3://lrstream-cli/ds changed since revision"
	detail := fmt.Sprintf("meta/info.json changed (size %d, ETag %x, now size %d, ETag %x)", len(info), md5.Sum(info), len(info)+1, md5.Sum(append(bytes.Clone(info), ' ')))
	if code == 0 || !strings.Contains(stderr, "holds a different pre-render") || !strings.Contains(stderr, want) || !strings.Contains(stderr, detail) {
		t.Fatalf("prerender after a change: exit %d %s", code, stderr)
	}
	t.Logf("prerender after a change: %s", strings.TrimSpace(stderr))
}

// batchLines returns the batch lines of a jsonl stream.
func batchLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"type":"batch"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatal("no batch")
	}
	return lines
}

// TestS3Prerender: prerender --out s3://… publishes the shards and the
// index (last); stream --from s3://… replays exactly what a local replay
// of the same pre-render gives; a rank pre-render from 2 "machines" into
// one prefix is finalized there; a prefix without an index is refused.
func TestS3Prerender(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	vars := s3Vars(t, srv, srv.Endpoint)
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	args := []string{"prerender", "--dataset", local, "--batch-size", "8", "--shard-size", "64KB", "-q"}
	localOut := filepath.Join(t.TempDir(), "pre")
	if _, stderr, code := prRun(t, vars, append(args, "--out", localOut)...); code != 0 {
		t.Fatal(stderr)
	}
	if _, stderr, code := prRun(t, vars, append(args, "--out", "s3://lrstream-cli/pre")...); code != 0 {
		t.Fatal(stderr)
	}
	// The same command again: the staging directory holds the complete
	// pre-render, the store has every file: nothing is uploaded.
	again := append(append([]string{}, args[:len(args)-1]...), "--out", "s3://lrstream-cli/pre")
	if _, stderr, code := prRun(t, vars, again...); code != 0 || !strings.Contains(stderr, ": 0 files uploaded") {
		t.Fatalf("prerender again: %d %s", code, stderr)
	}
	want, stderr, code := prRun(t, vars, "stream", "--from", localOut, "--format", "jsonl")
	if code != 0 {
		t.Fatal(stderr)
	}
	got, stderr, code := prRun(t, vars, "stream", "--from", "s3://lrstream-cli/pre", "--format", "jsonl")
	if code != 0 {
		t.Fatal(stderr)
	}
	if got != want {
		t.Fatal("the replay from the store differs from the local replay")
	}
	if out, stderr, code := prRun(t, vars, "verify", "s3://lrstream-cli/pre"); code != 0 || !strings.HasPrefix(out, "OK s3://lrstream-cli/pre:") {
		t.Fatalf("verify: %d %s %s", code, out, stderr)
	}
	// A shard damaged in the store: verify and the replay fail, naming it.
	shard, _ := os.ReadFile(filepath.Join(localOut, "shard-000000.msgpack.zst"))
	bad := bytes.Clone(shard)
	bad[len(bad)/2] ^= 0xff
	srv.Put("lrstream-cli", "pre/shard-000000.msgpack.zst", bad)
	if _, stderr, code := prRun(t, vars, "verify", "s3://lrstream-cli/pre"); code == 0 || !strings.Contains(stderr, "shard-000000") {
		t.Fatalf("verify of a damaged shard: %d %s", code, stderr)
	}
	if _, stderr, code := prRun(t, vars, "stream", "--from", "s3://lrstream-cli/pre", "--format", "jsonl"); code == 0 {
		t.Fatal("replayed a damaged shard")
	} else {
		t.Logf("replay of a damaged shard: %s", strings.TrimSpace(stderr))
	}
	srv.Put("lrstream-cli", "pre/shard-000000.msgpack.zst", shard)
	// Two ranks on two "machines" (own caches), one prefix; then finalize.
	for r := range 2 {
		rv := s3Vars(t, srv, srv.Endpoint)
		rargs := append(append([]string{}, args...), "--out", "s3://lrstream-cli/ranks", "--rank", string(rune('0'+r)), "--world-size", "2")
		if _, stderr, code := prRun(t, rv, rargs...); code != 0 {
			t.Fatalf("rank %d: %s", r, stderr)
		}
	}
	if _, stderr, code := prRun(t, vars, "stream", "--from", "s3://lrstream-cli/ranks", "--format", "jsonl"); code == 0 {
		t.Fatal("replayed an unfinalized multi-rank pre-render")
	} else {
		t.Logf("before --finalize: %s", strings.TrimSpace(stderr))
	}
	if _, stderr, code := prRun(t, vars, "prerender", "--finalize", "s3://lrstream-cli/ranks", "-q"); code != 0 {
		t.Fatal(stderr)
	}
	ranks, stderr, code := prRun(t, vars, "stream", "--from", "s3://lrstream-cli/ranks", "--format", "jsonl")
	if code != 0 {
		t.Fatal(stderr)
	}
	if n, m := len(batchLines(t, ranks)), len(batchLines(t, want)); n < m-2 || n > m+2 {
		t.Fatalf("the finalized 2-rank pre-render replays %d batches, the single one %d", n, m)
	}
	// serve --from s3://…: a client gets the frames a local replay streams.
	e, _, _ := genEnv()
	e.getenv = func(k string) string { return vars[k] }
	_, sock, _ := startServerEnv(t, e, "--from", "s3://lrstream-cli/pre")
	c := dialHello(t, sock, sink.Hello{WorldSize: 1, NumWorkers: 1})
	served, _ := servedFrames(t, c)
	c.Close()
	localBin, _, code := prRun(t, vars, "stream", "--from", localOut)
	if code != 0 {
		t.Fatal("local msgpack replay failed")
	}
	wantFrames, _ := servedFrames(t, strings.NewReader(localBin))
	if fmt.Sprint(served) != fmt.Sprint(wantFrames) || len(served[0]) == 0 {
		t.Fatalf("serve --from s3://… served %d frames, the local replay %d (or in another order)", len(served[0]), len(wantFrames[0]))
	}
	_, stderr, code = prRun(t, vars, "stream", "--from", "s3://lrstream-cli/nothing-here", "--format", "jsonl")
	if code == 0 || !strings.Contains(stderr, "no objects under this prefix") {
		t.Fatalf("an empty prefix: %d %s", code, stderr)
	}
}

// TestS3ServerRestartMidStream: the store's server is killed while a
// --download none stream is reading and comes back 1.5 s later; the
// stream retries through the outage and its batches equal the local
// copy's.
func TestS3ServerRestartMidStream(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	srv.PutDir("lrstream-cli", "ds", local)
	px := s3test.NewProxy(t, srv.Endpoint)
	args := []string{"stream", "--format", "jsonl", "--batch-size", "4", "--workers", "1"}
	want, stderr, code := prRun(t, nil, append(args, "--dataset", local)...)
	if code != 0 {
		t.Fatal(stderr)
	}
	px.SetDelay(30 * time.Millisecond) // a slow store: the stream is still reading when the server dies
	type result struct {
		out, stderr string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, stderr, code := prRun(t, s3Vars(t, srv, px.URL), append(args, "--dataset", "s3://lrstream-cli/ds", "--download", "none")...)
		done <- result{out, stderr, code}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for px.Requests() < 12 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	served := px.Requests()
	srv.Stop()
	time.Sleep(1500 * time.Millisecond)
	srv.Restart()
	r := <-done
	if r.code != 0 {
		t.Fatalf("the stream failed across the restart (after %d requests): %s", served, r.stderr)
	}
	if strings.Join(batchLines(t, r.out), "\n") != strings.Join(batchLines(t, want), "\n") {
		t.Fatal("the batches differ from the local copy's after a restart")
	}
	t.Logf("server killed after %d requests, back 1.5 s later; %d requests in all", served, px.Requests())
}

// TestS3Errors: wrong credentials and a missing bucket fail the command
// before any batch, with a clear error (in-band too) and no secret.
func TestS3Errors(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	srv.PutDir("lrstream-cli", "ds", prShared(t, "conformance", "datasets", "pub_inferred_front_wrist"))
	const secret = "wrong-secret-7f3a19"
	cases := []struct {
		name, dataset string
		vars          map[string]string
		want          string
	}{
		{"wrong secret", "s3://lrstream-cli/ds", s3Vars(t, srv, srv.Endpoint, "AWS_SECRET_ACCESS_KEY", secret), "check the credentials"},
		{"missing bucket", "s3://no-such-bucket/ds", s3Vars(t, srv, srv.Endpoint), "NoSuchBucket"},
		{"revision", "s3://lrstream-cli/ds", s3Vars(t, srv, srv.Endpoint), "revisions apply to Hub datasets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"stream", "--dataset", c.dataset, "--format", "jsonl"}
			if c.name == "revision" {
				args = append(args, "--revision", "main")
			}
			out, stderr, code := prRun(t, c.vars, args...)
			if code == 0 || !strings.Contains(stderr, c.want) || strings.Contains(stderr+out, secret) {
				t.Fatalf("exit %d, stderr %q: want %q and no secret", code, stderr, c.want)
			}
			if strings.Contains(out, `"type":"batch"`) {
				t.Fatal("batches before the error")
			}
		})
	}
}

// TestS3ObjectChangedMidStream: a data file is rewritten while a
// --download none stream reads the dataset; the stream fails naming the
// object and the pinned ETag instead of mixing two versions.
func TestS3ObjectChangedMidStream(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	local := prShared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	files := srv.PutDir("lrstream-cli", "ds", local)
	px := s3test.NewProxy(t, srv.Endpoint)
	px.SetDelay(30 * time.Millisecond)
	done := make(chan [2]string, 1)
	go func() {
		out, stderr, _ := prRun(t, s3Vars(t, srv, px.URL), "stream", "--dataset", "s3://lrstream-cli/ds", "--download", "none",
			"--format", "jsonl", "--batch-size", "4", "--workers", "1", "--epochs", "3")
		done <- [2]string{out, stderr}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for px.Requests() < 8 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for n := range files {
		if strings.HasPrefix(n, "data/") {
			b, _ := os.ReadFile(filepath.Join(local, filepath.FromSlash(n)))
			srv.Put("lrstream-cli", "ds/"+n, append(bytes.Clone(b), 0))
		}
	}
	r := <-done
	if !strings.Contains(r[1], "object changed since the run started") || !strings.Contains(r[1], "pinned ETag") {
		t.Fatalf("the stream did not fail on the changed object: %s", r[1])
	}
	if !strings.Contains(r[0], `"type":"error"`) {
		t.Fatal("no in-band error on stdout")
	}
	t.Logf("%s", strings.TrimSpace(r[1]))
}

// TestS3Cameras: camera frames decoded from videos in the store (FFmpeg
// reads a cached blob with --download full, a private temporary download
// with none) equal those of the local copy.
func TestS3Cameras(t *testing.T) {
	ds := cameraDataset(t)
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-cli")
	srv.PutDir("lrstream-cli", "cams", ds)
	args := []string{"stream", "--format", "jsonl", "--batch-size", "4", "--cameras", "all"}
	want, stderr, code := prRun(t, nil, append(args, "--dataset", ds)...)
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, mode := range []string{"full", "none"} {
		got, stderr, code := prRun(t, s3Vars(t, srv, srv.Endpoint), append(args, "--dataset", "s3://lrstream-cli/cams", "--download", mode)...)
		if code != 0 {
			t.Fatalf("%s: %s", mode, stderr)
		}
		if strings.Join(batchLines(t, got), "\n") != strings.Join(batchLines(t, want), "\n") {
			t.Fatalf("--download %s: camera batches differ from the local copy's", mode)
		}
	}
	// The header pins the video files of the decoded cameras, and only
	// those: none without cameras.
	var videos []string
	filepath.WalkDir(filepath.Join(ds, "videos"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(ds, p)
			videos = append(videos, filepath.ToSlash(rel))
		}
		return nil
	})
	for _, tc := range []struct {
		cameras string
		want    []string
	}{{"all", videos}, {"none", nil}} {
		out, stderr, code := prRun(t, s3Vars(t, srv, srv.Endpoint), "stream", "--batch-size", "4", "--cameras", tc.cameras, "--dataset", "s3://lrstream-cli/cams")
		if code != 0 {
			t.Fatalf("--cameras %s: %s", tc.cameras, stderr)
		}
		h := headerOf(t, out)
		if len(h.Pins) != 1 {
			t.Fatalf("--cameras %s: pins %+v", tc.cameras, h.Pins)
		}
		var got []string
		for _, f := range h.Pins[0].Files {
			if strings.HasPrefix(f.Name, "videos/") {
				got = append(got, f.Name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (tc.cameras == "all" && len(got) == 0) {
			t.Fatalf("--cameras %s: pinned videos %v, want %v", tc.cameras, got, tc.want)
		}
	}
}
