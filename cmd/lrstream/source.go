package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/lrstream/lrstream/fetch"
)

// hubFlags are the flags saying where a dataset comes from: the Hub
// download mode, cache directory and revision (every command that opens a
// dataset: stream, serve, prerender, inspect, bench, validate).
type hubFlags struct {
	download string
	cache    string // the old spelling of --download, accepted, not listed
	cacheDir string
	revision string
}

func (h *hubFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.download, "download", "full", "Hub data shards: full (download whole files into the Hugging Face cache, reused by later runs) or none (stream byte ranges, nothing cached; camera videos go to temporary files removed after use)")
	fs.StringVar(&h.cache, "cache", "", "old spelling of --download (full|none); not a directory: see --cache-dir")
	fs.StringVar(&h.cacheDir, "cache-dir", "", "Hugging Face cache `DIR`, as huggingface_hub's cache_dir (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub); for s3:// and hf://buckets/ datasets the root of lrstream's object cache instead (~/.cache/lrstream/s3 and ~/.cache/lrstream/hf-buckets when unset)")
	fs.StringVar(&h.revision, "revision", "", "Hub dataset revision (branch, tag or commit), as huggingface_hub's revision=; same as --dataset ORG/NAME@`REV`")
}

// options returns the Hub options the flags and the environment describe.
func (h *hubFlags) options(e *env) (fetch.HubOptions, error) {
	opts, err := fetch.HubOptionsFromEnv(e.getenv)
	if err != nil {
		return opts, err
	}
	mode := h.download
	if h.cache != "" {
		if m := strings.ToLower(h.cache); m != "full" && m != "none" {
			return opts, fmt.Errorf("--cache %q: --cache is the download mode (full or none; now spelled --download), not a directory: pass the cache directory with --cache-dir or HF_HUB_CACHE", h.cache)
		}
		mode = h.cache
	}
	if opts.Cache, err = fetch.ParseCacheMode(mode); err != nil {
		return opts, fmt.Errorf("--download: %w", err)
	}
	if h.cacheDir != "" {
		opts.CacheDir = h.cacheDir
	}
	if isTerminal(e.stderr) {
		opts.Progress = e.stderr
	}
	return opts, nil
}

// withRevision returns dataset with --revision applied (ORG/NAME@REV).
func (h *hubFlags) withRevision(dataset string) (string, error) {
	if h.revision == "" {
		return dataset, nil
	}
	if _, err := os.Stat(dataset); err == nil {
		return "", fmt.Errorf("--revision %s: %s is a local directory; revisions apply to Hub datasets", h.revision, dataset)
	}
	if at := strings.LastIndex(dataset, "@"); at >= 0 {
		if dataset[at+1:] != h.revision {
			return "", fmt.Errorf("--revision %s conflicts with --dataset %s: give the revision once", h.revision, dataset)
		}
		return dataset, nil
	}
	return dataset + "@" + h.revision, nil
}

// open opens dataset: an object store prefix (s3://, hf://buckets/), a
// local directory, or a Hub dataset as the flags say.
func (h *hubFlags) open(ctx context.Context, e *env, dataset string) (fetch.Source, error) {
	opts, err := h.options(e)
	if err != nil {
		return nil, err
	}
	if isStoreURL(dataset) { // an object store prefix (stores.go, docs/storage.md)
		if h.revision != "" {
			return nil, fmt.Errorf("--revision %s: %s is an object store prefix; revisions apply to Hub datasets (objects are pinned by ETag)", h.revision, dataset)
		}
		src, err := openStore(ctx, e, dataset, opts, h.cacheDir)
		if err != nil {
			return nil, err
		}
		return src, nil
	}
	if dataset, err = h.withRevision(dataset); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dataset)
	// A spec that is not a local path is a Hub id; offline, a failure to
	// connect at all ends the lookup at once (it may be a mistyped local
	// path: mydata/robot1).
	opts.ConnectFailFast = statErr != nil
	src, err := fetch.OpenDataset(ctx, dataset, opts)
	if err != nil && statErr != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "no such local directory") {
		return nil, fmt.Errorf("dataset %s is not a local directory (%s), so it was looked up as a Hub dataset id: %w", dataset, pathErrText(statErr), err)
	}
	return src, err
}

// pathErrText is why a local path cannot be used ("no such file or
// directory"), without repeating the path.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
