// Package s3 is a fetch.Source over S3-compatible object stores (AWS S3,
// Google Cloud Storage's XML API, Cloudflare R2, MinIO, Ceph, SeaweedFS,
// versitygw, the Hugging Face S3 gateway): --dataset s3://BUCKET/PREFIX.
//
// The objects under the prefix are listed once, when the source is opened,
// and each one's ETag is pinned: every later read asks for that ETag
// (If-Match) and fails with ErrObjectChanged if the object changed, and
// Revision is a digest of the pins, so the stream header and the resume
// fingerprint change with any object. Data shards are read with range
// requests through fetch.NewRangeFile (the Hub's prefetch and footer
// machinery) or downloaded whole into a node-local cache
// (content-addressed by bucket, key and ETag; safe between processes),
// which is enough to run offline. docs/storage.md is the user's guide.
package s3

import (
	"fmt"
	"strings"

	"github.com/lrstream/lrstream/fetch/objstore"
)

// Scheme prefixes an S3 dataset spec.
const Scheme = "s3://"

// IsURL reports whether spec names an S3 dataset (s3://…).
func IsURL(spec string) bool { return strings.HasPrefix(spec, Scheme) }

// ParseURL splits "s3://BUCKET[/PREFIX]" into the bucket and the prefix
// (no leading or trailing slash; "" for the bucket's root). Bucket names
// follow the rules common to S3-compatible stores: 3 to 63 characters,
// lower-case letters, digits, '.', '-' and '_' (GCS, some on-premises
// stores), starting and ending with a letter or digit. The prefix must be a
// clean relative path: no empty, "." or ".." segment, no backslash or
// control character.
func ParseURL(spec string) (bucket, prefix string, err error) {
	if !IsURL(spec) {
		return "", "", fmt.Errorf("s3 url %q: want s3://BUCKET[/PREFIX]", spec)
	}
	rest := strings.TrimPrefix(spec, Scheme)
	bucket, prefix, _ = strings.Cut(rest, "/")
	if err := validBucket(bucket); err != nil {
		return "", "", fmt.Errorf("s3 url %q: %w", spec, err)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return bucket, "", nil
	}
	if err := objstore.ValidKey(prefix); err != nil {
		return "", "", fmt.Errorf("s3 url %q: prefix: %w", spec, err)
	}
	return bucket, prefix, nil
}

func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q: want 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' && c != '_' {
			return fmt.Errorf("bucket name %q: character %q not allowed (lower-case letters, digits, '.', '-', '_')", b, c)
		}
		if (i == 0 || i == len(b)-1) && !alnum {
			return fmt.Errorf("bucket name %q: must start and end with a letter or digit", b)
		}
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("bucket name %q: \"..\" not allowed", b)
	}
	return nil
}

// URL formats bucket and prefix back into s3://BUCKET[/PREFIX].
func URL(bucket, prefix string) string {
	if prefix == "" {
		return Scheme + bucket
	}
	return Scheme + bucket + "/" + prefix
}
