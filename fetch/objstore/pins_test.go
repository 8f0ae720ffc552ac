package objstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDescribeChanges(t *testing.T) {
	old := map[string]Pin{
		"a.parquet": {Size: 10, ETag: "e1"},
		"b.parquet": {Size: 20, ETag: "e2"},
		"c.parquet": {Size: 30, ETag: "e3"},
	}
	many := map[string]Pin{}
	for i := range 8 {
		many[fmt.Sprintf("f%d", i)] = Pin{Size: 1, ETag: "x"}
	}
	for _, tc := range []struct {
		name      string
		old, new  map[string]Pin
		hash      string
		want      []string
		wantCount int
	}{
		{"same", old, old, "etag", []string{"no object differs"}, 0},
		{"changed", old, map[string]Pin{"a.parquet": {Size: 10, ETag: "e1"}, "b.parquet": {Size: 21, ETag: "f2"}, "c.parquet": {Size: 30, ETag: "e3"}}, "etag",
			[]string{"1 object differs: b.parquet changed (size 20, ETag e2, now size 21, ETag f2)"}, 1},
		{"added and removed", old, map[string]Pin{"a.parquet": {Size: 10, ETag: "e1"}, "b.parquet": {Size: 20, ETag: "e2"}, "d.parquet": {Size: 5, ETag: "e4"}}, "xet",
			[]string{"2 objects differ: c.parquet removed (was size 30, xet hash e3); d.parquet added (size 5, xet hash e4)"}, 2},
		{"first five of eight", map[string]Pin{}, many, "etag", []string{"8 objects differ: f0 added", "f4 added (size 1, ETag x); and 3 more"}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := DiffPins(tc.old, tc.new)
			if len(ch) != tc.wantCount {
				t.Fatalf("%d changes, want %d", len(ch), tc.wantCount)
			}
			got := DescribeChanges(ch, tc.hash, maxNamed)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("%q does not say %q", got, w)
				}
			}
			if strings.Contains(got, "f5") {
				t.Fatalf("%q names more than %d objects", got, maxNamed)
			}
		})
	}
}

// TestListingHistory: every listing is kept by digest (at most
// maxListings), and a source explains how it differs from an earlier one.
func TestListingHistory(t *testing.T) {
	ctx := context.Background()
	m := newMemStore(testFiles)
	o := testOptions(t, "")
	first, err := Open(ctx, m, o)
	if err != nil {
		t.Fatal(err)
	}
	name := "data/chunk-000/file-000.parquet"
	oldPin := first.Pins()[name]
	m.put(name, []byte("a new version"))
	m.put("meta/extra.json", []byte("{}"))
	second, err := Open(ctx, m, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := second.ExplainRevision(second.Revision()); ok {
		t.Fatal("the current revision explained as a change")
	}
	msg, ok := second.ExplainRevision(first.Revision())
	newPin := second.Pins()[name]
	for _, w := range []string{"mem://test changed since revision " + first.Revision(), "now " + second.Revision(), "2 objects differ",
		fmt.Sprintf("%s changed (size %d, ETag %s, now size %d, ETag %s)", name, oldPin.Size, oldPin.ETag, newPin.Size, newPin.ETag),
		"meta/extra.json added"} {
		if !ok || !strings.Contains(msg, w) {
			t.Fatalf("explanation %q (ok %v) does not say %q", msg, ok, w)
		}
	}
	if revs := second.PastRevisions(); len(revs) != 2 || revs[0] != second.Revision() {
		t.Fatalf("history %v", revs)
	}
	if _, ok := second.ExplainRevision(strings.Repeat("0", 40)); ok {
		t.Fatal("an unknown revision explained")
	}
	// A damaged history entry is not used.
	os.WriteFile(first.cache.historyPath(m.ID(), first.Revision()), []byte(`{"id":"mem://test","pins":{"x":{"size":1,"etag":"y"}}}`), 0o644)
	if _, ok := second.ExplainRevision(first.Revision()); ok {
		t.Fatal("a listing whose digest is not its name was used")
	}
	// Pruned to maxListings.
	for i := range maxListings + 3 {
		m.put("meta/n.json", []byte(strings.Repeat("v", i+1)))
		time.Sleep(2 * time.Millisecond) // distinct modification times
		if _, err := Open(ctx, m, o); err != nil {
			t.Fatal(err)
		}
	}
	if revs := second.PastRevisions(); len(revs) != maxListings {
		t.Fatalf("%d listings kept, want %d", len(revs), maxListings)
	}
}
