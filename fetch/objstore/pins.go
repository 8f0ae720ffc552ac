package objstore

import (
	"fmt"
	"sort"
	"strings"
)

// HashNamer is implemented by stores that say what a Pin's ETag field
// holds: "etag" (S3's ETag, the default) or "xet" (a Storage Bucket
// file's Xet content hash). It names the hash in stream headers.
type HashNamer interface {
	HashName() string
}

// PinHash names what the pins' ETag field holds ("etag" or "xet").
func (s *Source) PinHash() string {
	if h, ok := s.store.(HashNamer); ok {
		return h.HashName()
	}
	return "etag"
}

// PastRevisions returns the digests of the dataset's earlier listings kept
// in the cache's history (the current one included), most recent first.
func (s *Source) PastRevisions() []string { return s.cache.history(s.store.ID()) }

// PastPins returns the pins of the dataset's listing whose digest is rev,
// from the cache's history (false when the cache does not have it: a
// listing made on another node, or pruned).
func (s *Source) PastPins(rev string) (map[string]Pin, bool) {
	if rev == s.digest {
		return s.Pins(), true
	}
	pins, err := s.cache.readPastListing(s.store.ID(), rev)
	return pins, err == nil
}

// ExplainRevision describes how the objects pinned now differ from those
// of the earlier listing with digest old ("" and false when old is the
// current revision or its listing is not in the cache's history), for the
// errors of a resume refused after the dataset changed.
func (s *Source) ExplainRevision(old string) (string, bool) {
	if old == s.digest {
		return "", false
	}
	past, ok := s.PastPins(old)
	if !ok {
		return "", false
	}
	ch := DiffPins(past, s.pins)
	return fmt.Sprintf("%s changed since revision %s (now %s): %s", s.ID(), old, s.digest, DescribeChanges(ch, s.PinHash(), maxNamed)), true
}

// maxNamed is how many changed objects an explanation names.
const maxNamed = 5

// Change is one object that differs between two listings: Old is nil for
// an object added, New nil for one removed.
type Change struct {
	Name     string
	Old, New *Pin
}

// DiffPins lists the objects that differ between the listings old and new
// (added, removed, or with another size or hash), sorted by name.
func DiffPins(old, new map[string]Pin) []Change {
	var out []Change
	for name, o := range old {
		n, ok := new[name]
		switch {
		case !ok:
			out = append(out, Change{Name: name, Old: &o})
		case n != o:
			out = append(out, Change{Name: name, Old: &o, New: &n})
		}
	}
	for name, n := range new {
		if _, ok := old[name]; !ok {
			out = append(out, Change{Name: name, New: &n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DescribeChanges says which objects changed, the first max of them by
// name with their old and new size and hash (hash names it: "etag" or
// "xet"), and how many more.
func DescribeChanges(ch []Change, hash string, max int) string {
	if len(ch) == 0 {
		return "no object differs"
	}
	label := "ETag"
	if hash == "xet" {
		label = "xet hash"
	}
	pin := func(p *Pin) string { return fmt.Sprintf("size %d, %s %s", p.Size, label, p.ETag) }
	parts := make([]string, 0, min(len(ch), max)+1)
	for _, c := range ch[:min(len(ch), max)] {
		switch {
		case c.New == nil:
			parts = append(parts, fmt.Sprintf("%s removed (was %s)", c.Name, pin(c.Old)))
		case c.Old == nil:
			parts = append(parts, fmt.Sprintf("%s added (%s)", c.Name, pin(c.New)))
		default:
			parts = append(parts, fmt.Sprintf("%s changed (%s, now %s)", c.Name, pin(c.Old), pin(c.New)))
		}
	}
	if len(ch) > max {
		parts = append(parts, fmt.Sprintf("and %d more", len(ch)-max))
	}
	noun := "objects differ"
	if len(ch) == 1 {
		noun = "object differs"
	}
	return fmt.Sprintf("%d %s: %s", len(ch), noun, strings.Join(parts, "; "))
}
