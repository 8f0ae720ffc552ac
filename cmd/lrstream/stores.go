package main

import (
	"context"
	"fmt"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/hfbucket"
	"github.com/lrstream/lrstream/fetch/s3"
)

// openSource opens --dataset: hf://buckets/NS/NAME[/PREFIX] through
// fetch/hfbucket (the Hub's environment, hub; cacheDir or
// ~/.cache/lrstream/hf-buckets), s3://BUCKET/PREFIX through fetch/s3 (the AWS
// environment; hub.Cache as the download mode; cacheDir, when --cache-dir
// is given, as the cache root), anything else through fetch.OpenDataset
// (a local directory or a Hub dataset). docs/storage.md.
func openSource(ctx context.Context, e *env, dataset string, hub fetch.HubOptions, cacheDir string) (fetch.Source, error) {
	if hfbucket.IsURL(dataset) {
		dir := hfbucket.DefaultCacheDir(e.getenv)
		if cacheDir != "" {
			dir = cacheDir
		}
		return hfbucket.Open(ctx, dataset, hub, dir)
	}
	if !s3.IsURL(dataset) {
		return fetch.OpenDataset(ctx, dataset, hub)
	}
	o, err := s3.OptionsFromEnv(e.getenv)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	o.Cache = hub.Cache
	if cacheDir != "" {
		o.CacheDir = cacheDir
	}
	o.Logger = hub.Logger
	return s3.Open(ctx, dataset, o)
}
