package fetch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestListRefusesPaginationCycle: a Link rel="next" leading back to a page
// already read (itself, an earlier page, or the same cursor with its
// parameters reordered) fails at once, naming the cycle, instead of being
// followed up to the page cap.
func TestListRefusesPaginationCycle(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		// next returns the Link target for a request with cursor c ("" for the first page).
		next      func(base, c string) string
		wantPages int64
	}{
		{"self", func(base, c string) string { return base + "?recursive=true" }, 1},
		{"self with cursor", func(base, c string) string { return base + "?recursive=true&cursor=1" }, 2},
		{"two-page cycle", func(base, c string) string {
			if c == "2" {
				return base + "?recursive=true&cursor=1"
			}
			return base + "?recursive=true&cursor=2"
		}, 3},
		{"reordered parameters", func(base, c string) string {
			if c == "" {
				return base + "?cursor=1&recursive=true"
			}
			return base + "?recursive=true&cursor=1"
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pages atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasPrefix(r.URL.Path, "/api/datasets/o/n/revision/"):
					fmt.Fprintf(w, `{"sha":%q}`, sha)
				case strings.HasPrefix(r.URL.Path, "/api/datasets/o/n/tree/"):
					pages.Add(1)
					base := "http://" + r.Host + r.URL.Path
					w.Header().Set("Link", "<"+tc.next(base, r.URL.Query().Get("cursor"))+`>; rel="next"`)
					fmt.Fprint(w, `[]`)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h, err := OpenHub(ctx, "o/n", HubOptions{Endpoint: srv.URL, CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.List(ctx, "")
			if err == nil || !strings.Contains(err.Error(), "pagination cycles") {
				t.Fatalf("List = %v, want a pagination cycle error", err)
			}
			if n := pages.Load(); n != tc.wantPages {
				t.Errorf("%d pages requested, want %d", n, tc.wantPages)
			}
		})
	}
}
