// Package hfbucket reads datasets stored in Hugging Face Storage Buckets
// (hf://buckets/NS/NAME[/PREFIX]) through the Hub's bucket API, as
// huggingface_hub 1.33's bucket client and HfFileSystem do: the listing
// GET /api/buckets/NS/NAME/tree/PREFIX?recursive=true (paginated with
// Link), the bytes GET /buckets/NS/NAME/resolve/PATH with Range
// (redirected to the CDN). It is an objstore.Store: each file's xet hash
// is pinned when the run starts, and everything else (range reads, the
// node-local cache, offline runs, footers once per node) is
// fetch/objstore's. HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are read as
// for Hub datasets (fetch.HubOptionsFromEnv).
package hfbucket

import (
	"fmt"
	"strings"

	"github.com/lrstream/lrstream/fetch/objstore"
)

// Scheme prefixes a bucket dataset spec.
const Scheme = "hf://buckets/"

// IsURL reports whether spec names a Storage Bucket (hf://buckets/…).
func IsURL(spec string) bool { return strings.HasPrefix(spec, Scheme) }

// ParseURL splits "hf://buckets/NS/NAME[/PREFIX]" into the bucket id
// (NS/NAME) and the prefix (no slashes around; "" for the bucket root).
// NS and NAME follow the Hub's repo name rules: letters, digits, '-', '_'
// and '.', at most 96 characters, no "--" or "..", not starting or ending
// with '-' or '.'.
func ParseURL(spec string) (id, prefix string, err error) {
	if !IsURL(spec) {
		return "", "", fmt.Errorf("bucket url %q: want hf://buckets/NAMESPACE/NAME[/PREFIX]", spec)
	}
	parts := strings.SplitN(strings.TrimPrefix(spec, Scheme), "/", 3)
	if len(parts) < 2 {
		return "", "", fmt.Errorf("bucket url %q: want hf://buckets/NAMESPACE/NAME[/PREFIX]", spec)
	}
	for _, p := range parts[:2] {
		if err := validName(p); err != nil {
			return "", "", fmt.Errorf("bucket url %q: %w", spec, err)
		}
	}
	id = parts[0] + "/" + parts[1]
	if len(parts) == 3 {
		prefix = strings.TrimSuffix(parts[2], "/")
	}
	if prefix != "" {
		if err := objstore.ValidKey(prefix); err != nil {
			return "", "", fmt.Errorf("bucket url %q: prefix: %w", spec, err)
		}
	} else if len(parts) == 3 && parts[2] != "" && parts[2] != "/" {
		return "", "", fmt.Errorf("bucket url %q: bad prefix", spec)
	}
	return id, prefix, nil
}

func validName(n string) error {
	if n == "" || len(n) > 96 {
		return fmt.Errorf("name %q: want 1 to 96 characters", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("name %q: character %q not allowed", n, c)
		}
	}
	if strings.Contains(n, "--") || strings.Contains(n, "..") || strings.ContainsAny(n[:1]+n[len(n)-1:], "-.") {
		return fmt.Errorf("name %q: no \"--\" or \"..\", no '-' or '.' at either end", n)
	}
	return nil
}

// URL formats a bucket id and prefix back into hf://buckets/NS/NAME[/PREFIX].
func URL(id, prefix string) string {
	if prefix == "" {
		return Scheme + id
	}
	return Scheme + id + "/" + prefix
}
