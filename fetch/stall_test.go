package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/fakehub"
)

// stallOptions are fake-Hub options with a short progress deadline.
func stallOptions(t *testing.T, f *fakeHub, mode CacheMode, attempts int) HubOptions {
	o := f.options(t, t.TempDir(), mode)
	o.StallTimeout = 150 * time.Millisecond
	o.Retry.MaxAttempts = attempts
	return o
}

func TestHubStalledTransferResumes(t *testing.T) {
	const shard = "data/chunk-001/file-000.parquet"
	t.Run("full", func(t *testing.T) {
		f := newFakeHub(t)
		f.AddFault(&fakehub.Fault{Kind: "revision", N: 1, Stall: true}) // a JSON body stalls
		f.AddFault(&fakehub.Fault{Kind: "cdn", N: 2, Stall: true})      // an LFS download stalls twice
		f.AddFault(&fakehub.Fault{Kind: "resolve", N: 1, Stall: true})  // a non-LFS download stalls
		o := stallOptions(t, f, CacheFull, 5)
		h := mustOpenHub(t, fakeID, o)
		ctx := context.Background()
		for _, n := range []string{"meta/info.json", shard} { // info.json first: it takes the resolve stall
			got, err := ReadAll(ctx, h, n)
			if err != nil || !bytes.Equal(got, f.Files[n].Data) {
				t.Fatalf("%s after stalls: %v", n, err)
			}
		}
		if c := f.Snapshot(); c["cdn-range"] < 2 || c["resolve-range"] < 1 {
			t.Errorf("stalled downloads were not resumed with Range requests: %v", c)
		}
		if r := h.Stats().Retries; r < 4 {
			t.Errorf("retries = %d, want >= 4 (one per stall)", r)
		}
		noIncomplete(t, o.CacheDir)
	})
	t.Run("none", func(t *testing.T) {
		f := newFakeHub(t)
		o := stallOptions(t, f, CacheNone, 5)
		o.FooterSize = 512
		h := mustOpenHub(t, fakeID, o)
		f.AddFault(&fakehub.Fault{Kind: "cdn", N: 2, Stall: true})
		fi, err := h.Open(context.Background(), shard)
		if err != nil {
			t.Fatal(err)
		}
		defer fi.Close()
		b := make([]byte, 20000)
		if _, err := fi.ReadAt(b, 1000); err != nil || !bytes.Equal(b, f.Files[shard].Data[1000:21000]) {
			t.Fatalf("range read after stalls: %v", err)
		}
		if c := f.Snapshot(); c["cdn-range"] < 3 {
			t.Errorf("cdn range requests = %d, want >= 3 (two stalled, one resumed)", c["cdn-range"])
		}
	})
}

func TestHubStalledTransferGivesUp(t *testing.T) {
	const shard = "data/chunk-000/file-000.parquet"
	for _, mode := range []CacheMode{CacheFull, CacheNone} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFakeHub(t)
			f.Token = fakeToken
			o := stallOptions(t, f, mode, 3)
			o.StallTimeout = 50 * time.Millisecond
			h := mustOpenHub(t, fakeID, o)
			f.AddFault(&fakehub.Fault{Kind: "cdn", N: -1, Stall: true})
			start := time.Now()
			fi, err := h.Open(context.Background(), shard)
			if err == nil {
				_, err = fi.ReadAt(make([]byte, 100), 0)
				fi.Close()
			}
			el := time.Since(start)
			if err == nil {
				t.Fatal("a body that never finishes was read")
			}
			msg := err.Error()
			t.Logf("stall error after %v: %s", el, msg)
			if !errors.Is(err, ErrStalled) || !errors.Is(err, ErrRetryBudget) {
				t.Errorf("error does not match ErrStalled and ErrRetryBudget: %v", err)
			}
			if want := f.Server.URL + "/datasets/" + fakeID + "/resolve/" + fakeSHA + "/" + shard; !strings.Contains(msg, want) {
				t.Errorf("error does not name %s", want)
			}
			if strings.Contains(msg, fakeToken) || strings.Contains(msg, "X-Amz-Signature") {
				t.Fatal("the error leaks the token or a signed URL")
			}
			if el > 2*time.Second {
				t.Errorf("gave up after %v", el)
			}
			if mode == CacheFull {
				// The partial download stays for a later resume, but never
				// as a visible blob or snapshot file.
				blob := filepath.Join(o.CacheDir, RepoFolderName(fakeID), "blobs", f.Files[shard].SHA256)
				if _, err := os.Stat(blob); err == nil {
					t.Fatal("a stalled download became a blob")
				}
				if _, err := os.Stat(blob + ".incomplete"); err != nil {
					t.Errorf("no .incomplete file to resume from: %v", err)
				}
			}
		})
	}
}

// trickle delivers one byte per interval.
type trickle struct {
	n        int
	interval time.Duration
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.interval)
	r.n--
	p[0] = 'x'
	return 1, nil
}

func (r *trickle) Close() error { return nil }

func TestStallReaderProgressKeepsAlive(t *testing.T) {
	// Slow but steady: 10 bytes, one every 20ms, deadline 80ms (the whole
	// transfer takes longer than the deadline).
	s := newStallReader(&trickle{n: 10, interval: 20 * time.Millisecond}, 80*time.Millisecond)
	got, err := io.ReadAll(s)
	s.Close()
	if err != nil || len(got) != 10 {
		t.Fatalf("steady body: %d bytes, %v", len(got), err)
	}
	// A body whose next byte comes too late fails with ErrStalled.
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte("ab")) }()
	s = newStallReader(pr, 40*time.Millisecond)
	defer s.Close()
	got, err = io.ReadAll(s)
	if !errors.Is(err, ErrStalled) || string(got) != "ab" {
		t.Fatalf("stalled body: %q, %v", got, err)
	}
}
