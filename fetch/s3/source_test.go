package s3

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/internal/s3test"
)

const conformance = "../../../shared/conformance/datasets/pub_inferred_front_wrist"

// testOpts are options for a client of srv (or of a proxy in front of it)
// with a short retry policy.
func testOpts(t *testing.T, endpoint string) Options {
	t.Helper()
	return Options{
		Endpoint: endpoint, Region: s3test.Region,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, ""),
		CacheDir:    t.TempDir(),
		Retry:       fetch.RetryPolicy{MaxAttempts: 4, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxWait: time.Second},
	}
}

// serve starts a server holding the conformance dataset at
// s3://lrstream-test/sets/ds and returns it with the local files.
func serve(t *testing.T) (*s3test.Server, map[string]int64) {
	t.Helper()
	srv := s3test.Start(t)
	srv.CreateBucket("lrstream-test")
	files := srv.PutDir("lrstream-test", "sets/ds", conformance)
	return srv, files
}

const spec = "s3://lrstream-test/sets/ds"

func localBytes(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformance, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSourceReadsEveryFile reads every file of the dataset, whole and in
// random ranges (with prefetches), in both cache modes, and compares the
// bytes with the local copy.
func TestSourceReadsEveryFile(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		t.Run(string(mode), func(t *testing.T) {
			o := testOpts(t, srv.Endpoint)
			o.Cache = mode
			src, err := Open(ctx, spec, o)
			if err != nil {
				t.Fatal(err)
			}
			names, err := src.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != len(files) {
				t.Fatalf("listed %d files, uploaded %d", len(names), len(files))
			}
			if len(src.Revision()) != 40 || src.ID() != spec {
				t.Fatalf("ID %q revision %q", src.ID(), src.Revision())
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for _, name := range names {
				want := localBytes(t, name)
				got, err := fetch.ReadAll(ctx, src, name)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: bytes differ", name)
				}
				checkRanges(t, src, name, want, rng)
			}
			data, _ := src.List(ctx, "data")
			for _, n := range data {
				if !strings.HasPrefix(n, "data/") {
					t.Fatalf("List(data) returned %s", n)
				}
			}
			again, err := Open(ctx, spec, o)
			if err != nil {
				t.Fatal(err)
			}
			if again.Revision() != src.Revision() {
				t.Fatalf("revision changed between opens without a change: %s, %s", src.Revision(), again.Revision())
			}
		})
	}
}

// checkRanges reads random ranges of name, after prefetching some.
func checkRanges(t *testing.T, src *objstore.Source, name string, want []byte, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	f, err := src.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(want))
	if size == 0 {
		return
	}
	if p, ok := f.(fetch.Prefetcher); ok {
		var rs []fetch.Range
		for range 3 {
			off := rng.Int64N(size)
			rs = append(rs, fetch.Range{Off: off, Len: 1 + rng.Int64N(size-off)})
		}
		if err := p.Prefetch(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		off := rng.Int64N(size)
		n := 1 + rng.Int64N(size-off)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatalf("%s [%d,+%d): %v", name, off, n, err)
		}
		if !bytes.Equal(buf, want[off:off+n]) {
			t.Fatalf("%s [%d,+%d): bytes differ", name, off, n)
		}
	}
}
