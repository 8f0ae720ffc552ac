package xet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/fetch/xet"
	"github.com/lrstream/lrstream/internal/fakehub"
)

// hubTokens is a TokenSource reading the fake Hub's xet-write-token route
// (fetch/hfbucket has the real one; this keeps the test free of it).
func hubTokens(b *fakehub.Buckets, id string) xet.TokenSource {
	return func(ctx context.Context) (xet.Token, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.URL()+"/api/buckets/"+id+"/xet-write-token", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return xet.Token{}, err
		}
		defer resp.Body.Close()
		var t struct {
			CASURL      string `json:"casUrl"`
			AccessToken string `json:"accessToken"`
			Exp         int64  `json:"exp"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
			return xet.Token{}, err
		}
		return xet.Token{CASURL: t.CASURL, AccessToken: t.AccessToken, Expires: time.Unix(t.Exp, 0)}, nil
	}
}

var fast = xet.RetryPolicy{MaxAttempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestUploadRoundTrip: files uploaded through a session are in the CAS
// under the hash HashReader gives, rebuilt byte for byte from the xorbs
// (the fake CAS checks every xorb's hash and every file of the shard
// against the xorbs); small xorb limits split files across xorbs, and one
// xorb holds the end of one file and the start of the next.
func TestUploadRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name      string
		xorbLimit int
		files     [][]byte
	}{
		{"small files", 0, [][]byte{[]byte("a"), []byte("hello xet"), {}}},
		{"multi-chunk", 0, [][]byte{randomBytes(1, 700<<10), bytes.Repeat([]byte{0}, 1<<20)}},
		{"across xorbs", 256 << 10, [][]byte{randomBytes(2, 900<<10), randomBytes(3, 300<<10), randomBytes(4, 50)}},
		{"same file twice", 0, [][]byte{randomBytes(5, 200<<10), randomBytes(5, 200<<10)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := fakehub.NewBuckets(t)
			b.AddBucket("lab/robots")
			s := xet.NewSession(xet.NewCAS(hubTokens(b, "lab/robots"), fast, nil, nil))
			s.XorbLimit = c.xorbLimit
			var got []xet.File
			for i, data := range c.files {
				f, err := s.Upload(context.Background(), "file", bytes.NewReader(data))
				if err != nil {
					t.Fatalf("file %d: %v", i, err)
				}
				want, _, _, _ := xet.HashReader(bytes.NewReader(data))
				if f.Hash != want || f.Size != int64(len(data)) {
					t.Fatalf("file %d: hash %s size %d, want %s %d", i, f.Hash, f.Size, want, len(data))
				}
				got = append(got, f)
			}
			if err := s.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, f := range got {
				data, err := b.Content(f.Hash.String())
				if err != nil || !bytes.Equal(data, c.files[i]) {
					t.Fatalf("file %d: rebuilt %d bytes (%v), want %d", i, len(data), err, len(c.files[i]))
				}
			}
			if c.xorbLimit > 0 && b.Count("xorb") < 4 {
				t.Fatalf("%d xorbs uploaded with a %d-byte limit", b.Count("xorb"), c.xorbLimit)
			}
			if n := b.Count("shard"); n != 1 {
				t.Fatalf("%d shards uploaded, want 1", n)
			}
		})
	}
}

// TestUploadFaults: 503s and resets within the budget are retried, beyond
// it the upload fails naming the xorb; a revoked CAS token is replaced (one
// 401, then a new token); no error carries a token.
func TestUploadFaults(t *testing.T) {
	data := randomBytes(9, 300<<10)
	for _, c := range []struct {
		name    string
		fault   *fakehub.Fault
		revoke  bool
		wantErr string
	}{
		{"503 storm within the budget", &fakehub.Fault{Kind: "xorb", N: 3, Status: 503}, false, ""},
		{"429 on the shard", &fakehub.Fault{Kind: "shard", N: 2, Status: 429, Headers: map[string]string{"Retry-After": "0"}}, false, ""},
		{"dropped connections", &fakehub.Fault{Kind: "xorb", N: 2, Status: 502}, false, ""},
		{"503 beyond the budget", &fakehub.Fault{Kind: "xorb", N: -1, Status: 503}, false, "giving up after 4 attempts"},
		{"revoked token", nil, true, ""},
		{"expiring tokens", nil, false, ""},
		{"xorb refused", &fakehub.Fault{Kind: "xorb", N: -1, Status: 400}, false, "status 400"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := fakehub.NewBuckets(t)
			b.AddBucket("lab/robots")
			if c.name == "expiring tokens" {
				b.TokenTTL = 20 * time.Second // within the refresh margin: a new token each request
			}
			var issued []string
			src := hubTokens(b, "lab/robots")
			cas := xet.NewCAS(func(ctx context.Context) (xet.Token, error) {
				tok, err := src(ctx)
				issued = append(issued, tok.AccessToken)
				return tok, err
			}, fast, nil, nil)
			s := xet.NewSession(cas)
			if c.fault != nil {
				b.AddFault(c.fault)
			}
			if c.revoke { // a first session gets a token, which is then revoked
				s0 := xet.NewSession(cas)
				s0.Upload(context.Background(), "x", strings.NewReader("x"))
				if err := s0.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
				b.RevokeTokens()
			}
			f, err := s.Upload(context.Background(), "f", bytes.NewReader(data))
			if err == nil {
				err = s.Commit(context.Background())
			}
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := b.Content(f.Hash.String()); !bytes.Equal(got, data) {
					t.Fatal("content differs")
				}
				if c.revoke && len(issued) != 2 {
					t.Fatalf("%d tokens fetched, want 2 (one after the 401)", len(issued))
				}
				if n := b.Count("xorb") + b.Count("shard"); c.name == "expiring tokens" && len(issued) != n {
					t.Fatalf("%d tokens fetched for %d requests: expiring tokens are not replaced", len(issued), n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
			for _, tok := range issued {
				if strings.Contains(err.Error(), tok) {
					t.Fatalf("the error carries the CAS token: %v", err)
				}
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}

// TestUploadCanceled: a canceled context stops the upload with its error.
func TestUploadCanceled(t *testing.T) {
	b := fakehub.NewBuckets(t)
	b.AddBucket("lab/robots")
	b.XorbDelay = 5 * time.Second
	s := xet.NewSession(xet.NewCAS(hubTokens(b, "lab/robots"), fast, nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s.Upload(ctx, "f", bytes.NewReader(randomBytes(1, 100<<10)))
	if err := s.Commit(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
}
