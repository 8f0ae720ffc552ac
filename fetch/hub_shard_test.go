package fetch_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/shard"
)

// readDataset decodes a whole dataset the way the pipeline does.
func readDataset(t *testing.T, src fetch.Source) []*shard.Batch {
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
		b, err := shard.ReadUnit(ctx, src, ds, u, shard.Options{})
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
	id, options, dir, counts := fetch.FakeHubForTest(t)
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
