package hfbucket

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/internal/fakehub"
)

// TestPublish: every file is uploaded through the Xet CAS and registered
// with the bucket, the index files last in a batch of their own; a second
// publish skips what the bucket has (same Xet hash); a publish whose
// index changed deletes the remote index before anything else, so a
// failing publish leaves no index pairing old and new files.
func TestPublish(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	dir := t.TempDir()
	files := map[string][]byte{
		"shard-000000.bin": bytes.Repeat([]byte("shard zero "), 30000),
		"shard-000001.bin": []byte("one"),
		"empty.bin":        {},
		"index.json":       []byte(`{"shards": 2}`),
	}
	var names []string
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
		names = append(names, n)
	}
	ctx := context.Background()
	st, err := Publish(ctx, "hf://buckets/ns/name/pre", dir, names, []string{"index.json"}, hubOpts(t, fb))
	if err != nil || st.Uploaded != 4 || st.Skipped != 0 {
		t.Fatalf("publish: %+v %v", st, err)
	}
	got := fb.Files("ns/name")
	for n, want := range files {
		f, ok := got["pre/"+n]
		if !ok {
			t.Fatalf("%s not registered", n)
		}
		data, err := fb.Content(f.XetHash)
		if err != nil || !bytes.Equal(data, want) || f.Size != int64(len(want)) {
			t.Fatalf("%s: %d bytes (%v), want %d", n, len(data), err, len(want))
		}
	}
	b := fb.BatchLog()
	if len(b) != 2 || !slices.Equal(b[1], []string{"+pre/index.json"}) || slices.Contains(b[0], "+pre/index.json") {
		t.Fatalf("batches %v", b)
	}
	st, err = Publish(ctx, "hf://buckets/ns/name/pre", dir, names, []string{"index.json"}, hubOpts(t, fb))
	if err != nil || st.Uploaded != 0 || st.Skipped != 4 {
		t.Fatalf("publish again: %+v %v", st, err)
	}
	// A new index and shard, and the CAS refusing every xorb.
	os.WriteFile(filepath.Join(dir, "index.json"), []byte(`{"shards": 3}`), 0o644)
	os.WriteFile(filepath.Join(dir, "shard-000002.bin"), []byte("two"), 0o644)
	fb.AddFault(&fakehub.Fault{Kind: "xorb", N: -1, Status: 500})
	_, err = Publish(ctx, "hf://buckets/ns/name/pre", dir, append(names, "shard-000002.bin"), []string{"index.json"}, hubOpts(t, fb))
	if err == nil || !strings.Contains(err.Error(), "xorb") || strings.Contains(err.Error(), testToken) {
		t.Fatalf("publish against a failing CAS: %v", err)
	}
	if _, ok := fb.Files("ns/name")["pre/index.json"]; ok {
		t.Fatal("the stale index is still there after a failed publish")
	}
}

// TestBatchErrors: operations the bucket refuses come back as an error
// naming the files (a 422 when all failed, a 200 with a failed list).
func TestBatchErrors(t *testing.T) {
	fb := newFakeBucket(t, conformance)
	w, err := newWriter("hf://buckets/ns/name/pre", hubOpts(t, fb))
	if err != nil {
		t.Fatal(err)
	}
	unknown := strings.Repeat("ab", 32)
	known := fb.Files("ns/name")["sets/ds/meta/info.json"].XetHash
	for _, c := range []struct {
		name string
		ops  []batchOp
		want []string
	}{
		{"all failed", []batchOp{{Type: "addFile", Path: "pre/a", XetHash: unknown, MTime: 1}}, []string{"refused 1 of 1", "pre/a: xetHash " + unknown}},
		{"some failed", []batchOp{{Type: "addFile", Path: "pre/ok", XetHash: known, MTime: 1}, {Type: "deleteFile", Path: "pre/none"}}, []string{"refused 1 of 2", "pre/none: file not found"}},
	} {
		err := w.batch(context.Background(), c.ops)
		for _, s := range c.want {
			if err == nil || !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %v, want %q", c.name, err, s)
			}
		}
	}
	if _, ok := fb.Files("ns/name")["pre/ok"]; !ok {
		t.Fatal("the operation that succeeded was not applied")
	}
}
