package fetch

import (
	"os"
	"testing"
	"time"

	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/internal/testkit"
)

// fetch's tests run against internal/fakehub (the Hub's paths and
// headers, faults, request and byte counts) serving a conformance
// dataset.

const (
	fakeOrg   = "lerobot-test"
	fakeName  = "pub_inferred_front_wrist"
	fakeID    = fakeOrg + "/" + fakeName
	fakeSHA   = fakehub.DefaultSHA
	fakeToken = "hf_SECRETtoken_do_not_leak_123"
)

// fakeHub is the fake Hub of fetch's tests.
type fakeHub struct{ *fakehub.Hub }

func datasetDir(t *testing.T) string {
	t.Helper()
	p := testkit.Shared(t, "conformance", "datasets", fakeName)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("conformance dataset not available: %v", err)
	}
	return p
}

// newFakeHub serves the conformance dataset, listing trees in pages of
// five entries.
func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	return &fakeHub{fakehub.New(t, datasetDir(t), fakehub.Options{ID: fakeID, PageSize: 5})}
}

// options are options for the fake hub with fast retries.
func (f *fakeHub) options(t *testing.T, cache string, mode CacheMode) HubOptions {
	return HubOptions{
		Endpoint: f.URL(),
		Token:    f.Token,
		CacheDir: cache,
		Cache:    mode,
		Retry:    RetryPolicy{MaxAttempts: 5, MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxWait: 10 * time.Second},
	}
}
