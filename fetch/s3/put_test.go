package s3

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/s3test"
)

// TestPublish uploads a directory (one file in parts), the index last;
// publishing again uploads nothing; a changed file is uploaded again and
// the stale remote index is deleted first; a failed upload leaves no index.
func TestPublish(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-pub")
	px := s3test.NewProxy(t, srv.Endpoint)
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 12<<20+123) // 3 parts of 5 MiB
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	files := map[string][]byte{"shard-000000.msgpack.zst": big, "shard-000001.msgpack.zst": []byte("small"), "index.json": []byte(`{"complete":true}`)}
	for n, b := range files {
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	names := []string{"index.json", "shard-000000.msgpack.zst", "shard-000001.msgpack.zst"}
	o := testOpts(t, px.URL)
	st, err := Publish(ctx, "s3://lrstream-pub/pre", dir, names, []string{"index.json"}, 5<<20, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Uploaded != 3 || st.Multipart != 1 || st.Skipped != 0 {
		t.Fatalf("first publish: %+v", st)
	}
	var puts []string
	for _, l := range px.Log() {
		if strings.HasPrefix(l, "PUT ") || strings.HasPrefix(l, "POST ") {
			puts = append(puts, l)
		}
	}
	if len(puts) == 0 || puts[len(puts)-1] != "PUT /lrstream-pub/pre/index.json" {
		t.Fatalf("the index was not uploaded last: %v", puts)
	}
	src, err := Open(ctx, "s3://lrstream-pub/pre", o)
	if err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		got, err := fetch.ReadAll(ctx, src, n)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if e := src.Pins()["shard-000000.msgpack.zst"].ETag; !strings.HasSuffix(e, "-3") {
		t.Fatalf("the big file was not uploaded in 3 parts: ETag %s", e)
	}
	st, err = Publish(ctx, "s3://lrstream-pub/pre", dir, names, []string{"index.json"}, 5<<20, o)
	if err != nil || st.Uploaded != 0 || st.Skipped != 3 {
		t.Fatalf("second publish: %+v %v", st, err)
	}
	// A new pre-render whose upload fails: the old index is gone, no new one.
	os.WriteFile(filepath.Join(dir, "index.json"), []byte(`{"complete":true,"v":2}`), 0o644)
	os.WriteFile(filepath.Join(dir, "shard-000001.msgpack.zst"), []byte("changed"), 0o644)
	px.Inject(s3test.SlowDown, 20, "shard-000001")
	if _, err := Publish(ctx, "s3://lrstream-pub/pre", dir, names, []string{"index.json"}, 5<<20, o); !errors.Is(err, fetch.ErrRetryBudget) {
		t.Fatalf("publish through a 503 storm: %v", err)
	}
	src2, err := Open(ctx, "s3://lrstream-pub/pre", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src2.Pins()["index.json"]; ok {
		t.Fatal("a stale index.json survived an interrupted publish")
	}
}
