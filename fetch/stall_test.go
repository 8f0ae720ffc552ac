package fetch

import (
	"bytes"
	"context"
	"errors"
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
