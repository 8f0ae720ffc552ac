package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// groupUnits groups consecutive units that share an episode, so that every
// group holds whole episodes: an episode written across row groups or
// files is read as one piece (needed for --delta-timestamps windows, and it
// lets its persistent rows compile once). LeRobot's writer puts one
// episode in one row group, so groups are normally single units.
func groupUnits(units []shard.Unit) [][]shard.Unit {
	var out [][]shard.Unit
	for i, u := range units {
		if i > 0 && len(u.Episodes) > 0 {
			prev := units[i-1].Episodes
			if len(prev) > 0 && prev[len(prev)-1] == u.Episodes[0] {
				out[len(out)-1] = append(out[len(out)-1], u)
				continue
			}
		}
		out = append(out, []shard.Unit{u})
	}
	return out
}

// readGroup reads a group of units as one batch.
func readGroup(ctx context.Context, cfg *Config, g []shard.Unit, opts shard.Options) (*shard.Batch, error) {
	b, err := readEmitted(ctx, cfg, g[0], opts)
	if err != nil || len(g) == 1 {
		return b, err
	}
	for _, u := range g[1:] {
		nb, err := readEmitted(ctx, cfg, u, opts)
		if err != nil {
			return nil, err
		}
		if err := appendBatch(b, nb); err != nil {
			return nil, fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
		}
	}
	return b, nil
}

// appendBatch appends b2's frames to b.
func appendBatch(b, b2 *shard.Batch) error {
	n1, n2 := b.Len(), b2.Len()
	// Always concatenate into new arrays: the decoded slices may share
	// their backing arrays with other columns, so appending in place could
	// overwrite them.
	b.Index = slices.Concat(b.Index, b2.Index)
	b.EpisodeIndex = slices.Concat(b.EpisodeIndex, b2.EpisodeIndex)
	b.FrameIndex = slices.Concat(b.FrameIndex, b2.FrameIndex)
	b.TaskIndex = slices.Concat(b.TaskIndex, b2.TaskIndex)
	b.Timestamp = slices.Concat(b.Timestamp, b2.Timestamp)
	if b.HasPersistent || b2.HasPersistent {
		if b.PersistentOf == nil {
			b.PersistentOf = filled(n1, -1)
		}
		of := b2.PersistentOf
		if of == nil {
			of = filled(n2, -1)
		}
		base := int32(len(b.Persistent))
		joined := slices.Concat(b.PersistentOf, make([]int32, n2))
		for i, p := range of {
			if p >= 0 {
				p += base
			}
			joined[n1+i] = p
		}
		b.PersistentOf = joined
		b.Persistent = slices.Concat(b.Persistent, b2.Persistent)
		b.HasPersistent = true
	}
	if b.HasEvents || b2.HasEvents {
		if b.Events == nil {
			b.Events = make([][]schema.Row, n1)
		}
		ev := b2.Events
		if ev == nil {
			ev = make([][]schema.Row, n2)
		}
		b.Events = slices.Concat(b.Events, ev)
		b.HasEvents = true
	}
	if len(b.Features) != len(b2.Features) {
		return fmt.Errorf("%d numeric features, %d in the previous row group of the episode", len(b2.Features), len(b.Features))
	}
	for i := range b.Features {
		f, f2 := &b.Features[i], &b2.Features[i]
		if f.Name != f2.Name || f.DType != f2.DType || !slices.Equal(f.Shape, f2.Shape) {
			return fmt.Errorf("feature %s is %s%v, %s%v in the previous row group of the episode", f2.Name, f2.DType, f2.Shape, f.DType, f.Shape)
		}
		f.Data = slices.Concat(f.Data, f2.Data)
	}
	return nil
}

func filled(n int, v int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = v
	}
	return s
}
