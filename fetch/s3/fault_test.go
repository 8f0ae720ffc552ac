package s3

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/s3test"
)

// bigShard is the largest data file of the dataset.
func bigShard(t *testing.T, files map[string]int64) string {
	t.Helper()
	best := ""
	for n, size := range files {
		if strings.HasPrefix(n, "data/") && (best == "" || size > files[best]) {
			best = n
		}
	}
	if best == "" {
		t.Fatal("no data file")
	}
	return best
}

// TestFaults reads a shard through a proxy injecting faults: 503 storms
// shorter than the retry budget, cut and stalled bodies (resumed), in both
// cache modes; a storm longer than the budget fails with ErrRetryBudget.
func TestFaults(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	name := bigShard(t, files)
	want := localBytes(t, name)
	cases := []struct {
		fault  s3test.Fault
		n      int
		fails  bool
		stall  bool
		budget bool
	}{
		{fault: s3test.SlowDown, n: 3},
		{fault: s3test.Cut, n: 2},
		{fault: s3test.Stall, n: 1, stall: true},
		{fault: s3test.SlowDown, n: 12, fails: true, budget: true},
	}
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		for _, c := range cases {
			t.Run(string(mode)+"/"+faultName(c.fault), func(t *testing.T) {
				px := s3test.NewProxy(t, srv.Endpoint)
				o := testOpts(t, px.URL)
				o.Cache = mode
				if c.stall {
					o.StallTimeout = 300 * time.Millisecond
				}
				src, err := Open(ctx, spec, o)
				if err != nil {
					t.Fatal(err)
				}
				px.Inject(c.fault, c.n, "/"+name)
				got, err := fetch.ReadAll(ctx, src, name)
				if c.fails {
					if err == nil || (c.budget && !errors.Is(err, fetch.ErrRetryBudget)) {
						t.Fatalf("want a retry budget error, got %v", err)
					}
					if !strings.Contains(err.Error(), name) {
						t.Fatalf("error does not name the object: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatal("bytes differ after faults")
				}
				if px.Pending() != 0 {
					t.Fatalf("%d faults not reached", px.Pending())
				}
				if src.Stats().Retries < int64(c.n) {
					t.Fatalf("stats: %+v, want >= %d retries", src.Stats(), c.n)
				}
			})
		}
	}
}

func faultName(f s3test.Fault) string {
	return map[s3test.Fault]string{s3test.Pass: "pass", s3test.SlowDown: "503", s3test.Cut: "cut", s3test.Stall: "stall"}[f]
}

// TestObjectChanged: an object rewritten after Open fails every read of it
// with ErrObjectChanged naming the pin (range reads and downloads); a new
// Open pins the new version and has another Revision.
func TestObjectChanged(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	name := bigShard(t, files)
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		t.Run(string(mode), func(t *testing.T) {
			o := testOpts(t, srv.Endpoint)
			o.Cache = mode
			src, err := Open(ctx, spec, o)
			if err != nil {
				t.Fatal(err)
			}
			changed := append(localBytes(t, name), []byte("tampered")...)
			srv.Put("lrstream-test", "sets/ds/"+name, changed)
			defer srv.Put("lrstream-test", "sets/ds/"+name, localBytes(t, name))
			_, err = fetch.ReadAll(ctx, src, name)
			if !errors.Is(err, ErrObjectChanged) || !strings.Contains(err.Error(), src.Pins()[name].ETag) {
				t.Fatalf("want ErrObjectChanged naming the pinned ETag, got %v", err)
			}
			again, err := Open(ctx, spec, o)
			if err != nil {
				t.Fatal(err)
			}
			if again.Revision() == src.Revision() {
				t.Fatal("the revision did not change with an object")
			}
			got, err := fetch.ReadAll(ctx, again, name)
			if err != nil || !bytes.Equal(got, changed) {
				t.Fatalf("new version: %v", err)
			}
		})
	}
}

// TestAccessErrors: wrong credentials, a missing bucket, an empty prefix:
// clear errors, no secret in them.
func TestAccessErrors(t *testing.T) {
	srv, _ := serve(t)
	ctx := context.Background()
	const secret = "not-the-secret-4d1c9e"
	cases := []struct {
		name, spec string
		opts       func(*Options)
		want       string
		notExist   bool
	}{
		{"wrong secret", spec, func(o *Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(s3test.AccessKey, secret, "")
		}, "check the credentials", false},
		{"unknown key", spec, func(o *Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("AKIDUNKNOWN", secret, "")
		}, "check the credentials", false},
		{"anonymous", spec, func(o *Options) { o.Anonymous = true }, "check the credentials", false},
		{"missing bucket", "s3://no-such-bucket-x/ds", nil, "NoSuchBucket", true},
		{"empty prefix", "s3://lrstream-test/nothing/here", nil, "no objects under this prefix", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := testOpts(t, srv.Endpoint)
			if c.opts != nil {
				c.opts(&o)
			}
			_, err := Open(ctx, c.spec, o)
			if err == nil {
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q: want %q and no secret", err, c.want)
			}
			if c.notExist != errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("errors.Is(fs.ErrNotExist) = %v: %v", !c.notExist, err)
			}
		})
	}
}

// TestOfflineFromCache: after a CacheFull pass, the dataset opens and
// reads with the server stopped (Offline), with the same Revision; a
// CacheNone pass leaves the shards out, which offline reads report.
func TestOfflineFromCache(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	o := testOpts(t, srv.Endpoint)
	src, err := Open(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	for n := range files {
		if _, err := fetch.ReadAll(ctx, src, n); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	off := o
	off.Offline = true
	cached, err := Open(ctx, spec, off)
	if err != nil {
		t.Fatal(err)
	}
	if cached.Revision() != src.Revision() {
		t.Fatalf("offline revision %s, online %s", cached.Revision(), src.Revision())
	}
	for n := range files {
		got, err := fetch.ReadAll(ctx, cached, n)
		if err != nil || !bytes.Equal(got, localBytes(t, n)) {
			t.Fatalf("offline %s: %v", n, err)
		}
		p, release, err := fetch.Materialize(ctx, cached, n)
		if err != nil || !strings.HasPrefix(p, o.CacheDir) {
			t.Fatalf("materialize %s offline: %q %v", n, p, err)
		}
		release()
	}
	// Without HF_HUB_OFFLINE: the stopped server is unreachable, the
	// cached listing serves the run.
	fell, err := Open(ctx, spec, o)
	if err != nil || !fell.UsingCachedListing() || fell.Revision() != src.Revision() {
		t.Fatalf("unreachable store with a warm cache: %v", err)
	}
	if got, err := fetch.ReadAll(ctx, fell, "meta/info.json"); err != nil || !bytes.Equal(got, localBytes(t, "meta/info.json")) {
		t.Fatalf("read after the fallback: %v", err)
	}
	cold := testOpts(t, srv.Endpoint)
	if _, err := Open(ctx, spec, cold); err == nil || !strings.Contains(err.Error(), "no usable listing in the cache") {
		t.Fatalf("unreachable store, cold cache: %v", err)
	}
	cold.Offline = true
	if _, err := Open(ctx, spec, cold); !errors.Is(err, fetch.ErrOffline) {
		t.Fatalf("cold offline open: %v", err)
	}
}

// TestOfflineMissesShards: a CacheNone run caches metadata only.
func TestOfflineMissesShards(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	o := testOpts(t, srv.Endpoint)
	o.Cache = fetch.CacheNone
	src, err := Open(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	name := bigShard(t, files)
	if _, err := fetch.ReadAll(ctx, src, name); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch.ReadAll(ctx, src, "meta/info.json"); err != nil {
		t.Fatal(err)
	}
	o.Offline = true
	off, err := Open(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fetch.ReadAll(ctx, off, "meta/info.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := off.Open(ctx, name); !errors.Is(err, fetch.ErrOffline) {
		t.Fatalf("offline shard after a CacheNone run: %v", err)
	}
}

// TestServerRestart: the server is killed while a read waits in its
// retries and comes back; the read completes.
func TestServerRestart(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	o := testOpts(t, srv.Endpoint)
	o.Cache = fetch.CacheNone
	o.Retry = fetch.RetryPolicy{MaxAttempts: 8, MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, MaxWait: 30 * time.Second}
	src, err := Open(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	name := bigShard(t, files)
	srv.Stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(700 * time.Millisecond)
		srv.Restart()
	}()
	got, err := fetch.ReadAll(ctx, src, name)
	wg.Wait()
	if err != nil || !bytes.Equal(got, localBytes(t, name)) {
		t.Fatalf("read across a restart: %v", err)
	}
	if src.Stats().Retries == 0 {
		t.Fatal("no retry counted")
	}
}

// TestCacheSharedBetweenSources: sources on one cache directory download
// each file once, also when they ask concurrently.
func TestCacheSharedBetweenSources(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	px := s3test.NewProxy(t, srv.Endpoint)
	o := testOpts(t, px.URL)
	name := bigShard(t, files)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, err := Open(ctx, spec, o)
			if err == nil {
				_, err = fetch.ReadAll(ctx, src, name)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := px.BytesOf()["/lrstream-test/sets/ds/"+name]; got != files[name] {
		t.Fatalf("served %d bytes of %s to 4 sources on one cache, want %d (once)", got, name, files[name])
	}
}
