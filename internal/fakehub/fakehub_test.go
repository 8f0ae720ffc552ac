package fakehub

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		v          string
		start, end int64
		ok         bool
	}{
		{"bytes=0-9", 0, 9, true},
		{"bytes=5-", 5, 99, true},
		{"bytes=-10", 90, 99, true},
		{"bytes=-1000", 0, 99, true},
		{"bytes=90-200", 90, 99, true},
		{"bytes=100-", 0, 0, false},
		{"bytes=9-5", 0, 0, false},
		{"bytes=0-1,5-6", 0, 0, false},
		{"bytes=-0", 0, 0, false},
		{"items=0-1", 0, 0, false},
		{"bytes=x-1", 0, 0, false},
	} {
		s, e, ok := ParseRange(c.v, 100)
		if ok != c.ok || ok && (s != c.start || e != c.end) {
			t.Errorf("ParseRange(%q) = %d, %d, %v; want %d, %d, %v", c.v, s, e, ok, c.start, c.end, c.ok)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=5-", "bytes=-10", "bytes=9-5", "bytes=0-1,2-3"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, v string, size int64) {
		if size <= 0 {
			return
		}
		s, e, ok := ParseRange(v, size)
		if ok && (s < 0 || s > e || e >= size) {
			t.Fatalf("ParseRange(%q, %d) = %d, %d", v, size, s, e)
		}
	})
}

// TestServedSpans: the Hub counts the bytes and ranges it serves per
// file, through the CDN redirect of LFS files, and HEAD costs no bytes.
func TestServedSpans(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i)
	}
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "f.parquet"), data, 0o644)
	h := New(t, dir, Options{ID: "org/x"})
	get := func(method, rng string) []byte {
		req, _ := http.NewRequest(method, h.URL()+"/datasets/org/x/resolve/"+h.SHA+"/data/f.parquet", nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	if b := get("GET", "bytes=100-199"); len(b) != 100 || b[0] != 100 {
		t.Fatalf("range body %d bytes", len(b))
	}
	get("GET", "bytes=-8")
	get("HEAD", "")
	bytes, gets := h.Served()
	spans := h.ServedSpans()["data/f.parquet"]
	if bytes["data/f.parquet"] != 108 || gets["data/f.parquet"] != 2 || len(spans) != 2 || spans[0] != (Span{100, 100}) || spans[1] != (Span{992, 8}) {
		t.Fatalf("served %v, %v, spans %v", bytes, gets, spans)
	}
	if h.Count("resolve") != 3 || h.Count("cdn") != 3 {
		t.Fatalf("requests %v", h.Snapshot())
	}
	h.ResetServed()
	if b, _ := h.Served(); len(b) != 0 {
		t.Fatalf("after ResetServed: %v", b)
	}
}
