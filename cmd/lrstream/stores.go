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

// checkPrerenderOut refuses a --out (or --finalize) that names a URL
// prerender cannot write to, which would otherwise be taken for a local
// directory named "gs:" or "http:".
func checkPrerenderOut(flag, spec string) error {
	switch {
	case spec == "" || isStoreURL(spec):
		return nil
	case strings.Contains(spec, "://"):
		return fmt.Errorf("%s %s: not a local directory nor an s3:// or hf://buckets/ prefix (the stores prerender writes to)", flag, spec)
	}
	return nil
}

// s3Options is the S3 configuration of the environment.
func s3Options(e *env) (s3.Options, error) { return s3.OptionsFromEnv(e.getenv) }

// storeStaging is the local directory a pre-render to spec (s3://… or
// hf://buckets/…) renders into before it is published: in the store's
// cache, named by the hash of the endpoint and spec, so an interrupted run
// resumes there like a local --out.
func storeStaging(e *env, spec string) (string, error) {
	var root, endpoint string
	if hfbucket.IsURL(spec) {
		if _, _, err := hfbucket.ParseURL(spec); err != nil {
			return "", fmt.Errorf("--out: %w", err)
		}
		hub, err := fetch.HubOptionsFromEnv(e.getenv)
		if err != nil {
			return "", err
		}
		root, endpoint = hfbucket.DefaultCacheDir(e.getenv), hub.Endpoint
	} else {
		if _, _, err := s3.ParseURL(spec); err != nil {
			return "", fmt.Errorf("--out: %w", err)
		}
		o, err := s3Options(e)
		if err != nil {
			return "", err
		}
		root, endpoint = o.CacheDir, o.Endpoint
	}
	sum := sha256.Sum256([]byte(endpoint + "\x00" + spec))
	dir := filepath.Join(root, "prerender-staging", hex.EncodeToString(sum[:16]))
	return dir, os.MkdirAll(dir, 0o755)
}

// checkStoreWrite fails early when spec is a bucket its token cannot
// write to (S3 keys are only checked by the first upload).
func checkStoreWrite(ctx context.Context, e *env, spec string) error {
	if !hfbucket.IsURL(spec) {
		return nil
	}
	hub, err := fetch.HubOptionsFromEnv(e.getenv)
	if err != nil {
		return err
	}
	if err := hfbucket.CheckWrite(ctx, spec, hub); err != nil {
		return fmt.Errorf("--out %s: %w", spec, err)
	}
	return nil
}

// publishStats says what a publish did, whatever the store.
type publishStats struct {
	Uploaded, Skipped, Multipart int
	Bytes                        int64
}

// publishPrerender uploads the pre-render files of dir (shards, then the
// index files last; lock and temporary files are not pre-render files) to
// spec.
func publishPrerender(ctx context.Context, e *env, spec, dir string) (publishStats, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return publishStats{}, err
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
	return publishFiles(ctx, e, spec, dir, names, last)
}

// publishFiles uploads names of dir to spec, last after the others.
func publishFiles(ctx context.Context, e *env, spec, dir string, names, last []string) (publishStats, error) {
	if hfbucket.IsURL(spec) {
		hub, err := fetch.HubOptionsFromEnv(e.getenv)
		if err != nil {
			return publishStats{}, err
		}
		st, err := hfbucket.Publish(ctx, spec, dir, names, last, hub)
		return publishStats{Uploaded: st.Uploaded, Skipped: st.Skipped, Bytes: st.Bytes}, err
	}
	o, err := s3Options(e)
	if err != nil {
		return publishStats{}, err
	}
	st, err := s3.Publish(ctx, spec, dir, names, last, 0, o)
	return publishStats{Uploaded: st.Uploaded, Skipped: st.Skipped, Multipart: st.Multipart, Bytes: st.Bytes}, err
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
