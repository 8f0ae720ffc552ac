package objstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidKey: an accepted key joined to a directory stays inside it and
// is clean.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"data/chunk-000/file-000.parquet", "a/../b", "a//b", "./a", "a\\b", "meta/info.json", ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidKey(s) != nil {
			return
		}
		root := "/cache/root"
		j := filepath.Join(root, filepath.FromSlash(s))
		if !strings.HasPrefix(j, root+"/") || filepath.ToSlash(j[len(root)+1:]) != s {
			t.Fatalf("%q: joined to %s", s, j)
		}
	})
}

// FuzzReadListing: a cached listing is accepted only with the dataset's id,
// pins and safe paths; accepted pins round-trip through writeListing.
func FuzzReadListing(f *testing.F) {
	f.Add(`{"id":"s3://b/p","pins":{"meta/info.json":{"size":3,"etag":"abc"}}}`)
	f.Add(`{"id":"s3://b/p","pins":{"../x":{"size":3,"etag":"abc"}}}`)
	f.Add(`{"id":"other","pins":{"a":{"size":1,"etag":"e"}}}`)
	f.Add(`{"id":"s3://b/p","pins":{}}`)
	f.Fuzz(func(t *testing.T, data string) {
		c := &cache{root: t.TempDir()}
		p := c.listingPath("s3://b/p")
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		pins, err := c.readListing("s3://b/p")
		if err != nil {
			return
		}
		for name, pin := range pins {
			if ValidKey(name) != nil || pin.Size < 0 || pin.ETag == "" {
				t.Fatalf("accepted %q %+v", name, pin)
			}
		}
		if err := c.writeListing("s3://b/p", pins); err != nil {
			t.Fatal(err)
		}
		again, err := c.readListing("s3://b/p")
		if err != nil || PinDigest(again) != PinDigest(pins) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
