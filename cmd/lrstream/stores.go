package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/hfbucket"
	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/fetch/s3"
	"github.com/lrstream/lrstream/prerender"
)

// isStoreURL reports whether spec names an object store prefix.
func isStoreURL(spec string) bool { return s3.IsURL(spec) || hfbucket.IsURL(spec) }

// openStore opens an object store prefix: hf://buckets/NS/NAME[/PREFIX]
// through fetch/hfbucket (the Hub's environment, hub; cacheDir or
// ~/.cache/lrstream/hf-buckets), s3://BUCKET/PREFIX through fetch/s3 (the
// AWS environment; hub.Cache as the download mode; cacheDir, when
// --cache-dir is given, as the cache root).
func openStore(ctx context.Context, e *env, spec string, hub fetch.HubOptions, cacheDir string) (*objstore.Source, error) {
	if hfbucket.IsURL(spec) {
		dir := hfbucket.DefaultCacheDir(e.getenv)
		if cacheDir != "" {
			dir = cacheDir
		}
		return hfbucket.Open(ctx, spec, hub, dir)
	}
	o, err := s3.OptionsFromEnv(e.getenv)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", spec, err)
	}
	o.Cache = hub.Cache
	if cacheDir != "" {
		o.CacheDir = cacheDir
	}
	o.Logger = hub.Logger
	return s3.Open(ctx, spec, o)
}

// checkPrerenderOut refuses a --out (or --finalize) that names a store
// lrstream cannot write to: a Storage Bucket (the Hub's bucket API takes
// new content only through the Xet upload protocol, docs/storage.md,
// "Writing to a Storage Bucket") or another URL, which would otherwise be
// taken for a local directory named "hf:" or "gs:".
func checkPrerenderOut(flag, spec string) error {
	switch {
	case spec == "" || s3.IsURL(spec):
		return nil
	case hfbucket.IsURL(spec):
		return fmt.Errorf("%s %s: lrstream cannot write to a Storage Bucket: the Hub takes new bucket files only through the Xet upload protocol, which lrstream does not speak (docs/storage.md, \"Writing to a Storage Bucket\"); "+
			"publish through the bucket's S3 gateway instead (%s s3://NAME/PREFIX with AWS_ENDPOINT_URL=https://s3.hf.co/NAMESPACE and the gateway's HFAK… keys), "+
			"or render to a directory and upload it with the hf CLI, index files last", flag, spec, flag)
	case strings.Contains(spec, "://"):
		return fmt.Errorf("%s %s: not a local directory nor an s3:// prefix (the only store prerender writes to)", flag, spec)
	}
	return nil
}

// s3Options is the S3 configuration of the environment.
func s3Options(e *env) (s3.Options, error) { return s3.OptionsFromEnv(e.getenv) }

// s3Staging is the local directory a pre-render to spec (s3://…) renders
// into before it is published: in the S3 cache, named by the spec's hash,
// so an interrupted run resumes there like a local --out.
func s3Staging(e *env, spec string) (string, error) {
	if _, _, err := s3.ParseURL(spec); err != nil {
		return "", fmt.Errorf("--out: %w", err)
	}
	o, err := s3Options(e)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(o.Endpoint + "\x00" + spec))
	dir := filepath.Join(o.CacheDir, "prerender-staging", hex.EncodeToString(sum[:16]))
	return dir, os.MkdirAll(dir, 0o755)
}

// publishPrerender uploads the pre-render files of dir (shards, then the
// index files last; lock and temporary files are not pre-render files) to
// spec.
func publishPrerender(ctx context.Context, e *env, spec, dir string) (s3.PublishStats, error) {
	o, err := s3Options(e)
	if err != nil {
		return s3.PublishStats{}, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return s3.PublishStats{}, err
	}
	var names, last []string
	for _, d := range ents {
		n := d.Name()
		if !d.Type().IsRegular() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, ".lock") {
			continue
		}
		names = append(names, n)
		if strings.HasSuffix(n, "index.json") {
			last = append(last, n)
		}
	}
	return s3.Publish(ctx, spec, dir, names, last, 0, o)
}

// mirrorStore makes the pre-render at spec (s3://… or hf://buckets/…) a
// local directory for replay, verify and finalize: every object is
// downloaded into the node's object cache (verified; once per node) and
// linked into a temporary directory, which cleanup removes (the cache
// keeps the files).
func mirrorStore(ctx context.Context, e *env, spec string) (dir string, cleanup func(), err error) {
	hub, err := fetch.HubOptionsFromEnv(e.getenv)
	if err != nil {
		return "", nil, err
	}
	hub.Cache = fetch.CacheFull
	src, err := openStore(ctx, e, spec, hub, "")
	if err != nil {
		return "", nil, err
	}
	if _, ok := src.Pins()[prerender.IndexFile]; !ok && !hasRankIndex(src.Pins()) {
		return "", nil, fmt.Errorf("%s holds no pre-render (no %s): not written yet, or still being published", spec, prerender.IndexFile)
	}
	dir, err = os.MkdirTemp("", "lrstream-prerender-*")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	names, _ := src.List(ctx, "")
	for _, n := range names {
		if strings.Contains(n, "/") {
			continue // not a pre-render file
		}
		p, _, err := fetch.Materialize(ctx, src, n)
		if err == nil {
			err = os.Symlink(p, filepath.Join(dir, n))
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("%s: %w", spec, err)
		}
	}
	return dir, cleanup, nil
}

func hasRankIndex(pins map[string]objstore.Pin) bool {
	for n := range pins {
		if strings.HasPrefix(n, "rank") && strings.HasSuffix(n, "-index.json") {
			return true
		}
	}
	return false
}

// mirrorError names the object store prefix instead of its local mirror in
// an error about the mirrored pre-render.
type mirrorError struct {
	err error
	msg string
}

func (m *mirrorError) Error() string { return m.msg }
func (m *mirrorError) Unwrap() error { return m.err }

func inSpec(err error, local, spec string) error {
	if err == nil || local == spec {
		return err
	}
	return &mirrorError{err: err, msg: strings.ReplaceAll(err.Error(), local, spec)}
}
