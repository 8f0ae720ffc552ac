package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHubStalledTransfers: a body that stops mid-way (headers sent, then
// silence) is abandoned after StallTimeout and retried — downloads resume
// with a Range request, streamed ranges continue from the bytes they have
// — and a transfer that keeps stalling fails within the retry budget with
// ErrStalled, naming the URL and never the token.
func TestHubStalledTransfers(t *testing.T) {
	const stall = 150 * time.Millisecond
	name := "data/chunk-001/file-000.parquet"

	t.Run("download resumes", func(t *testing.T) {
		f := newFakeHub(t)
		f.token = fakeToken
		f.addFault(&fault{kind: "cdn", n: 2, stall: true})
		f.addFault(&fault{kind: "resolve", n: 1, stall: true}) // a small (non-LFS) file
		o := f.options(t, t.TempDir(), CacheFull)
		o.StallTimeout = stall
		start := time.Now()
		h := mustOpenHub(t, fakeID, o)
		readAllCompare(t, f, h)
		if el := time.Since(start); el > 20*time.Second {
			t.Errorf("took %v", el)
		}
		if f.ranged["cdn"] == 0 {
			t.Errorf("no Range request resumed the stalled download (requests %v)", f.snapshot())
		}
		if h.Stats().Retries < 3 {
			t.Errorf("retries = %d, want >= 3", h.Stats().Retries)
		}
	})

	t.Run("range read resumes", func(t *testing.T) {
		f := newFakeHub(t)
		o := f.options(t, t.TempDir(), CacheNone)
		o.StallTimeout = stall
		o.FooterSize = 512
		h := mustOpenHub(t, fakeID, o)
		fi, err := h.Open(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		defer fi.Close()
		f.addFault(&fault{kind: "cdn", n: 1, stall: true})
		b := make([]byte, 20000)
		if _, err := fi.ReadAt(b, 1000); err != nil || !bytes.Equal(b, f.files[name].data[1000:21000]) {
			t.Fatalf("ReadAt after a stall: %v", err)
		}
	})

	t.Run("keeps stalling", func(t *testing.T) {
		f := newFakeHub(t)
		f.token = fakeToken
		o := f.options(t, t.TempDir(), CacheFull)
		o.StallTimeout = stall
		h := mustOpenHub(t, fakeID, o)
		f.addFault(&fault{kind: "cdn", n: -1, stall: true})
		start := time.Now()
		_, err := h.Open(context.Background(), name)
		el := time.Since(start)
		if err == nil {
			t.Fatal("a download that always stalls succeeded")
		}
		t.Logf("error after %v: %v", el, err)
		if !errors.Is(err, ErrStalled) || !errors.Is(err, ErrRetryBudget) {
			t.Errorf("error %v is not ErrStalled after the retry budget", err)
		}
		if el > 10*time.Second {
			t.Errorf("failing took %v", el)
		}
		msg := err.Error()
		if !strings.Contains(msg, "/resolve/"+fakeSHA+"/"+name) || !strings.Contains(msg, "no data for") {
			t.Errorf("error %q does not name the URL and the stall", msg)
		}
		if strings.Contains(msg, fakeToken) || strings.Contains(msg, "X-Amz-Signature") {
			t.Errorf("error %q leaks a credential", msg)
		}
	})
}

// TestHubUnreachableFallsBackToCache: without HF_HUB_OFFLINE, a Hub that
// cannot be reached (a closed port, a name that does not resolve, a Hub
// that only answers 503) is answered as huggingface_hub does: with the
// cached snapshot of the requested revision, said once on Notices, within
// seconds and without further requests. A Hub that answers (404) is not
// overridden, and without a cached snapshot the error says so.
func TestHubUnreachableFallsBackToCache(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	h := mustOpenHub(t, fakeID, f.options(t, cache, CacheFull))
	readAllCompare(t, f, h)

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, tc := range []struct{ name, endpoint string }{
		{"closed port", deadURL},
		{"no such host", "http://lrstream-no-such-host.invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, spec := range []string{fakeID, fakeID + "@" + fakeSHA, fakeID + "@main"} {
				o := f.options(t, cache, CacheFull)
				o.Endpoint = tc.endpoint
				o.Retry.MaxWait = time.Minute
				var notes bytes.Buffer
				o.Notices = &notes
				start := time.Now()
				off, err := OpenHub(context.Background(), spec, o)
				if err != nil {
					t.Fatalf("%s: %v", spec, err)
				}
				if el := time.Since(start); el > 5*time.Second {
					t.Errorf("%s: fallback took %v", spec, el)
				}
				// A commit whose snapshot is cached needs no network at
				// all (nothing to say); a branch falls back, and says so.
				wantNote := !strings.HasSuffix(spec, fakeSHA)
				if off.Revision() != fakeSHA || strings.Contains(notes.String(), "using the cached snapshot "+fakeSHA) != wantNote {
					t.Fatalf("%s: revision %s, notices %q", spec, off.Revision(), notes.String())
				}
				readAllCompare(t, f, off)
			}
		})
	}

	t.Run("hub answers 503", func(t *testing.T) {
		f.addFault(&fault{kind: "revision", n: -1, status: 503})
		before := f.count("revision")
		o := f.options(t, cache, CacheFull)
		var notes bytes.Buffer
		o.Notices = &notes
		off := mustOpenHub(t, fakeID, o)
		if n := f.count("revision") - before; n > 2 {
			t.Errorf("%d revision requests before falling back, want <= 2", n)
		}
		readAllCompare(t, f, off)
		if !strings.Contains(notes.String(), "503") {
			t.Errorf("notice %q does not say why", notes.String())
		}
	})

	t.Run("no cache", func(t *testing.T) {
		o := f.options(t, t.TempDir(), CacheFull)
		o.Endpoint = deadURL
		o.Retry.MaxAttempts = 2
		_, err := OpenHub(context.Background(), fakeID, o)
		if err == nil || !strings.Contains(err.Error(), "no cached snapshot") || !strings.Contains(err.Error(), "HF_HUB_OFFLINE=1") {
			t.Fatalf("unreachable Hub, cold cache: %v", err)
		}
	})

	t.Run("hub answers 404", func(t *testing.T) {
		g := newFakeHub(t)
		gc := t.TempDir()
		readAllCompare(t, g, mustOpenHub(t, fakeID, g.options(t, gc, CacheFull)))
		g.addFault(&fault{kind: "revision", n: -1, status: 404})
		if _, err := OpenHub(context.Background(), fakeID, g.options(t, gc, CacheFull)); err == nil {
			t.Fatal("a 404 from a reachable Hub fell back to the cache")
		}
	})
}
