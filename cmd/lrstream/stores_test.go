package main

import (
	"os"
	"strings"
	"testing"
)

// TestPrerenderOutStores: prerender refuses to write to a Storage Bucket
// (the Xet upload protocol) and to other URLs, before reading anything and
// without creating a local "hf:" or "gs:" directory.
func TestPrerenderOutStores(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "hf://buckets/lab/robots/pre"}, "cannot write to a Storage Bucket"},
		{[]string{"--finalize", "hf://buckets/lab/robots/pre"}, "Xet upload protocol"},
		{[]string{"--out", "gs://b/pre"}, "not a local directory nor an s3:// prefix"},
	} {
		_, stderr, code := prRun(t, map[string]string{"HOME": t.TempDir()}, append([]string{"prerender", "-q"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Fatalf("%v: exit %d %s", c.args, code, stderr)
		}
	}
	for _, d := range []string{"hf:", "gs:"} {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("a local %q directory was created", d)
		}
	}
}
