package fetch_test

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/fakehub"
	"github.com/lrstream/lrstream/internal/testkit"
	"github.com/lrstream/lrstream/shard"
)

// shardHub serves a conformance dataset through internal/fakehub and
// returns it, the options for a cache directory and mode (fast retries),
// and the local directory.
func shardHub(t *testing.T) (*fakehub.Hub, func(cache string, mode fetch.CacheMode) fetch.HubOptions, string) {
	t.Helper()
	dir := testkit.Shared(t, "conformance", "datasets", "pub_inferred_front_wrist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance dataset not available: %v", err)
	}
	h := fakehub.New(t, dir, fakehub.Options{ID: "lerobot-test/pub_inferred_front_wrist", PageSize: 5})
	return h, func(cache string, mode fetch.CacheMode) fetch.HubOptions {
		return fetch.HubOptions{Endpoint: h.URL(), CacheDir: cache, Cache: mode,
			Retry: fetch.RetryPolicy{MaxAttempts: 5, MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxWait: 10 * time.Second}}
	}, dir
}

// readDataset decodes a whole dataset the way the pipeline does.
func readDataset(t *testing.T, src fetch.Source, opts ...shard.Options) []*shard.Batch {
	t.Helper()
	ctx := context.Background()
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		t.Fatalf("OpenDataset(%s): %v", src.ID(), err)
	}
	units, err := shard.Plan(ctx, src, ds, shard.Selection{})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	var out []*shard.Batch
	for _, u := range units {
		var o shard.Options
		if len(opts) > 0 {
			o = opts[0]
		}
		b, err := shard.ReadUnit(ctx, src, ds, u, o)
		if err != nil {
			t.Fatalf("ReadUnit %s/%d: %v", u.File, u.RowGroup, err)
		}
		out = append(out, b)
	}
	return out
}

// TestHubFramesMatchLocal: every decoded frame read through the Hub, in
// both cache modes, equals the local read.
func TestHubFramesMatchLocal(t *testing.T) {
	hub, options, dir := shardHub(t)
	id, counts := hub.ID, hub.Snapshot
	local, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := readDataset(t, local)
	frames := 0
	for _, b := range want {
		frames += len(b.Index)
	}
	for _, mode := range []fetch.CacheMode{fetch.CacheFull, fetch.CacheNone} {
		before := counts()
		o := options(t.TempDir(), mode)
		if mode == fetch.CacheNone {
			// Small footer and gap so the shards (< 64 KiB here) are
			// really read range by range.
			o.FooterSize = 4 << 10
			o.PrefetchGap = 1 << 10
		}
		h, err := fetch.OpenHub(context.Background(), id, o)
		if err != nil {
			t.Fatal(err)
		}
		got := readDataset(t, h)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cache=%s: decoded batches differ from the local read", mode)
		}
		after := counts()
		t.Logf("cache=%s: %d units, %d frames identical; requests revision=%d tree=%d resolve=%d cdn=%d (ranged %d); stats %+v",
			mode, len(got), frames, after["revision"]-before["revision"], after["tree"]-before["tree"],
			after["resolve"]-before["resolve"], after["cdn"]-before["cdn"], after["cdn-range"]-before["cdn-range"], h.Stats())
	}
}

// TestHubStreamsOnlyProjectedColumns: with no numeric features requested
// (language and core columns only), streaming moves less than the shards.
func TestHubStreamsOnlyProjectedColumns(t *testing.T) {
	hub, options, dir := shardHub(t)
	id := hub.ID
	local, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := shard.Options{Features: []string{}}
	want := readDataset(t, local, opts)
	o := options(t.TempDir(), fetch.CacheNone)
	o.FooterSize = 4 << 10
	o.PrefetchGap = 1 << 10
	h, err := fetch.OpenHub(context.Background(), id, o)
	if err != nil {
		t.Fatal(err)
	}
	// Warm the metadata first so the byte count below is the shards'.
	if _, err := shard.OpenDataset(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	meta := h.Stats().BytesFetched
	got := readDataset(t, h, opts)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("decoded batches differ from the local read")
	}
	var shardBytes int64
	names, _ := local.List(context.Background(), "data")
	for _, n := range names {
		f, err := local.Open(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		shardBytes += f.Size()
		f.Close()
	}
	moved := h.Stats().BytesFetched - meta
	t.Logf("language+core columns only: %d shard bytes moved of %d (%.0f%%), %d requests in all",
		moved, shardBytes, 100*float64(moved)/float64(shardBytes), h.Stats().Requests)
	if moved >= shardBytes {
		t.Errorf("streamed %d bytes, not less than the %d bytes of the shards", moved, shardBytes)
	}
}
