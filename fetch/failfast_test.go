package fetch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConnectFailFast: with HubOptions.ConnectFailFast a Hub that cannot
// be connected to at all (refused, unknown host) fails the revision
// lookup after one attempt, without a cached snapshot (issue 24 item 10:
// a mistyped local path was retried for 30-45 s offline); without it the
// retry budget is spent.
func TestConnectFailFast(t *testing.T) {
	f := newFakeHub(t)
	for _, tc := range []struct {
		name     string
		dns      bool
		failFast bool
	}{
		{"refused, retried", false, false},
		{"refused, fail fast", false, true},
		{"unknown host, fail fast", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.options(t, t.TempDir(), CacheFull)
			o.Endpoint = closedEndpoint(t)
			if tc.dns {
				o.Transport = noDNS()
			}
			o.Retry.MaxAttempts = 3
			o.ConnectFailFast = tc.failFast
			start := time.Now()
			_, err := OpenHub(context.Background(), fakeID, o)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("%v, want ErrUnreachable", err)
			}
			retried := strings.Contains(err.Error(), "3 attempts")
			if retried == tc.failFast {
				t.Errorf("retried %t with ConnectFailFast %t: %v", retried, tc.failFast, err)
			}
			if tc.failFast && time.Since(start) > 2*time.Second {
				t.Errorf("fail fast took %v", time.Since(start))
			}
		})
	}
}
