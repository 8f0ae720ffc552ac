package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
)

// connectFailure reports whether err means the Hub could not be
// connected to at all: the name does not resolve, the connection is
// refused, or no route leads to it. Retrying such errors a few seconds
// later rarely helps, so they are not retried when a cached snapshot can
// be used instead.
func connectFailure(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// unreachable reports whether a failed request means "the Hub could not
// be reached" (no answer, or only retryable failures until the budget ran
// out) rather than a definitive answer (a 404 for an unknown revision, a
// 401/403, a malformed answer). Only the former falls back to the cache.
func unreachable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var he *HTTPError
	if !errors.As(err, &he) {
		return false
	}
	return he.StatusCode == 0 || he.Budget
}

// cachedHint lists the snapshots of this dataset the cache does hold, if
// any, so the user can pin one of them (and go offline).
func (h *Hub) cachedHint() string {
	ents, err := os.ReadDir(h.cache.snapshotDir(""))
	if err != nil {
		return "; no snapshot of this dataset is cached at all: it must be downloaded once with network access"
	}
	var shas []string
	for _, e := range ents {
		if e.IsDir() && shaRE.MatchString(e.Name()) {
			shas = append(shas, e.Name())
		}
	}
	if len(shas) == 0 {
		return "; no snapshot of this dataset is cached at all: it must be downloaded once with network access"
	}
	sort.Strings(shas)
	if len(shas) > 3 {
		shas = append(shas[:3], "…")
	}
	return fmt.Sprintf("; the cache holds other snapshots of it (%s): to use one without the network, ask for %s@<commit> with HF_HUB_OFFLINE=1",
		strings.Join(shas, ", "), h.id)
}
