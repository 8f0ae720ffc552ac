package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

// IndexCache remembers the keep index of each run configuration, so that
// the many streams of one server (ranks × dataloader workers) render the
// selection's language once instead of once per client. It is safe for
// concurrent use; the zero value is ready.
type IndexCache struct {
	mu sync.Mutex
	m  map[string]*cachedIndex
}

type cachedIndex struct {
	once sync.Once
	idx  *keepIndex
	err  error
}

// get returns the keep index for srcs, building it once per key. A nil
// cache builds it every time. Failed builds are not kept.
func (c *IndexCache) get(ctx context.Context, srcs []Mix, key string, pass bool) (*keepIndex, error) {
	if c == nil {
		return keepIndexOf(ctx, srcs, pass)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*cachedIndex{}
	}
	e := c.m[key]
	if e == nil {
		e = &cachedIndex{}
		c.m[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.idx, e.err = keepIndexOf(ctx, srcs, pass) })
	if e.err != nil {
		c.mu.Lock()
		if c.m[key] == e {
			delete(c.m, key)
		}
		c.mu.Unlock()
		// Another stream's build was cancelled (its client left): build
		// again for this one.
		if ctx.Err() == nil && (errors.Is(e.err, context.Canceled) || errors.Is(e.err, context.DeadlineExceeded)) {
			return c.get(ctx, srcs, key, pass)
		}
	}
	return e.idx, e.err
}

// keepIndex is the result of the pre-pass (or of metadata alone, see
// metaKeepIndex): which frames of the selection
// are kept (rendered or passed through), and where each frame lives.
// Positions number the selected frames of every source, source after
// source, in plan order.
type keepIndex struct {
	units     [][]shard.Unit // unit groups (see groupUnits)
	src       []int          // source of each unit group
	unitStart []int64        // first position of each group; len(units)+1 entries
	runs      [][]order.Run  // per source
	keep      []bool
	failed    []int64 // positions whose rendering failed, ascending
	stats     Stats
	// meta is set when the index was built from metadata (metaKeepIndex):
	// every frame kept, and the rows served are checked against runs.
	meta bool
}

// unkeptShare counts the frames of one epoch that are not kept and belong
// to consumer c of C: dropped and failed frames at positions p with
// p mod C == c (docs/wire-format.md, "end"). Over the C consumers the
// shares add up to the selection's drops and errors.
func (x *keepIndex) unkeptShare(c, C int64) (dropped, errs int64) {
	fi := 0
	for p, k := range x.keep {
		if k {
			continue
		}
		failed := fi < len(x.failed) && x.failed[fi] == int64(p)
		if failed {
			fi++
		}
		if int64(p)%C != c {
			continue
		}
		if failed {
			errs++
		} else {
			dropped++
		}
	}
	return dropped, errs
}

// unkeptIn counts the dropped and failed frames of runs.
func (x *keepIndex) unkeptIn(runs []order.Run) (dropped, errs int64) {
	for _, r := range runs {
		for p := r.Start; p < r.Start+r.Len; p++ {
			if x.keep[p] {
				continue
			}
			if _, failed := slices.BinarySearch(x.failed, p); failed {
				errs++
			} else {
				dropped++
			}
		}
	}
	return dropped, errs
}

// buildKeepIndex renders every source's selection once, reading only the
// language columns, to learn which frames are kept. Rendering is
// deterministic, so the answer holds for every epoch.
func buildKeepIndex(ctx context.Context, srcs []Mix) (*keepIndex, error) {
	idx := &keepIndex{runs: make([][]order.Run, len(srcs))}
	var pos int64
	for d, m := range srcs {
		c := *m.Config
		c.Features = []string{}
		c.Share = Share{}
		c.Progress = nil
		// Which frames are kept depends on rendering only: no camera
		// frames here (a camera failure at serve time is an error,
		// batchOf).
		c.Cameras, c.Images = nil, nil
		err := runGroups(ctx, &c, func(g []shard.Unit, ch *Chunk) error {
			if err := idx.stats.Count(&c, ch); err != nil {
				return err
			}
			idx.units = append(idx.units, g)
			idx.src = append(idx.src, d)
			idx.unitStart = append(idx.unitStart, pos)
			b := ch.Batch
			runs := idx.runs[d]
			for i := range ch.Results {
				switch ch.Results[i].Outcome {
				case render.Rendered, render.Passthrough:
					idx.keep = append(idx.keep, true)
				case render.Failed:
					idx.keep = append(idx.keep, false)
					idx.failed = append(idx.failed, pos)
				default:
					idx.keep = append(idx.keep, false)
				}
				ep := b.EpisodeIndex[i]
				if k := len(runs); k > 0 && runs[k-1].Episode == ep && runs[k-1].Start+runs[k-1].Len == pos {
					runs[k-1].Len++
				} else {
					runs = append(runs, order.Run{Episode: ep, Start: pos, Len: 1})
				}
				pos++
			}
			if pos > order.MaxPositions {
				return order.ErrTooManyPositions
			}
			idx.runs[d] = runs
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	idx.unitStart = append(idx.unitStart, pos)
	return idx, nil
}

// unitOf returns the unit holding position p.
func (x *keepIndex) unitOf(p int64) int {
	return sort.Search(len(x.units), func(i int) bool { return x.unitStart[i+1] > p })
}

// keepMemo remembers, across the epochs of one partitioned-order stream,
// which frames of each episode the keep index kept: 1 bit a frame, plus
// the episode's dropped and failed counts. Rendering is deterministic, so
// an episode's keep bits never change; an epoch whose partitions bring
// episodes the consumer has seen before needs only the language columns
// of the new ones, and the keep index of the epoch is assembled from the
// plan (footers) and the memo (docs/training.md, "Storage read per
// consumer").
//
// The first epoch still reads the consumer's language columns twice (once
// here, once with its batches): the order needs every frame's keep bit
// before its first batch, and keeping the decoded language (or the
// rendered results) of the consumer's whole share until its frames are
// served would hold 1/C of the dataset's language in memory.
type keepMemo struct {
	eps map[int64]*episodeKeep
	// noMemo lists episodes the memo cannot describe (frames not in one
	// run, or not in the plan's order): epochs holding one build their
	// keep index by reading, as before.
	noMemo map[int64]bool
	// learned counts the frames whose language was read (tests).
	learned int64
	// pass forces the keep pass where metadata would do (tests).
	pass bool
}

// episodeKeep is one episode's keep bits.
type episodeKeep struct {
	n             int64    // frames read
	bits          []uint64 // bit i: frame i of the episode is kept
	dropped, errs int64
	groupUnits    []unitKey // the units of the group it was read in that list it
}

// unitKey names a unit (file and row group).
type unitKey struct {
	file string
	rg   int
}

func newKeepMemo() *keepMemo {
	return &keepMemo{eps: map[int64]*episodeKeep{}, noMemo: map[int64]bool{}}
}

// index returns the keep index of cfg's selection, which holds exactly the
// episodes eps. Episodes the memo knows are not read again.
func (m *keepMemo) index(ctx context.Context, cfg *Config, eps []int64) (*keepIndex, error) {
	if !m.pass {
		// Every frame kept by construction: nothing to read or remember.
		idx, ok, err := metaKeepIndex(ctx, []Mix{{Config: cfg, Weight: 1}})
		if err != nil || ok {
			return idx, err
		}
	}
	var unknown []int64
	for _, e := range eps {
		if m.eps[e] == nil {
			unknown = append(unknown, e)
		}
	}
	build := func(c *Config) (*keepIndex, error) {
		idx, err := buildKeepIndex(ctx, []Mix{{Config: c, Weight: 1}})
		if err == nil {
			m.learn(idx)
		}
		return idx, err
	}
	if len(unknown) == len(eps) {
		return build(cfg)
	}
	if len(unknown) > 0 {
		c := *cfg
		c.Selection = episodeSelection(unknown)
		if _, err := build(&c); err != nil {
			return nil, err
		}
	}
	for _, e := range eps {
		if m.noMemo[e] || m.eps[e] == nil {
			return build(cfg)
		}
	}
	idx, ok, err := m.assemble(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if ok && !(cfg.SkipErrors && cfg.MaxErrors > 0 && idx.stats.Errors > cfg.MaxErrors) {
		return idx, nil
	}
	// Not assembled, or more failed frames than --max-errors allows: read,
	// so that the error names a frame as it always did.
	return build(cfg)
}

// learn records the keep bits of the episodes idx read.
func (m *keepMemo) learn(idx *keepIndex) {
	g := 0
	var last int64 = -1 // the previous run's episode's from index, per group
	lastGroup := -1
	fromOf := map[int64]int64{}
	for _, r := range idx.runs[0] {
		m.learned += r.Len
		for g+1 < len(idx.units) && idx.unitStart[g+1] <= r.Start {
			g++
		}
		if _, seen := fromOf[r.Episode]; seen || m.noMemo[r.Episode] {
			// Frames of one episode in two runs.
			m.noMemo[r.Episode] = true
			delete(m.eps, r.Episode)
			continue
		}
		fromOf[r.Episode] = r.Start
		if r.Start+r.Len > idx.unitStart[g+1] {
			m.noMemo[r.Episode] = true
			continue
		}
		// Within a group, episodes must come in the order assemble puts
		// them: ascending episode index.
		if g == lastGroup && r.Episode < last {
			m.noMemo[r.Episode] = true
			continue
		}
		last, lastGroup = r.Episode, g
		k := &episodeKeep{n: r.Len, bits: make([]uint64, (r.Len+63)/64)}
		for i := int64(0); i < r.Len; i++ {
			if idx.keep[r.Start+i] {
				k.bits[i/64] |= 1 << (i % 64)
			}
		}
		for _, u := range idx.units[g] {
			if slices.Contains(u.Episodes, r.Episode) {
				k.groupUnits = append(k.groupUnits, unitKey{u.File, u.RowGroup})
			}
		}
		m.eps[r.Episode] = k
	}
	// Dropped and failed frames, per episode.
	fi := 0
	for _, r := range idx.runs[0] {
		k := m.eps[r.Episode]
		for p := r.Start; p < r.Start+r.Len; p++ {
			failed := false
			for fi < len(idx.failed) && idx.failed[fi] < p {
				fi++
			}
			if fi < len(idx.failed) && idx.failed[fi] == p {
				failed = true
			}
			if k == nil || idx.keep[p] {
				continue
			}
			if failed {
				k.errs++
			} else {
				k.dropped++
			}
		}
	}
}

// assemble builds the keep index of cfg's selection from the memo and the
// plan (no language is read). ok is false when the plan does not group the
// episodes as they were read (the caller then reads them).
func (m *keepMemo) assemble(ctx context.Context, cfg *Config) (*keepIndex, bool, error) {
	p, err := newPlanner(cfg)
	if err != nil {
		return nil, false, err
	}
	idx := &keepIndex{runs: make([][]order.Run, 1)}
	var pos int64
	placed := map[int64]bool{}
	for {
		g, more, err := p.nextGroup(ctx)
		if err != nil {
			return nil, false, err
		}
		if !more {
			break
		}
		var eps []int64
		for _, u := range g {
			for _, e := range u.Episodes {
				if !slices.Contains(eps, e) {
					eps = append(eps, e)
				}
			}
		}
		slices.Sort(eps)
		idx.units = append(idx.units, g)
		idx.src = append(idx.src, 0)
		idx.unitStart = append(idx.unitStart, pos)
		for _, e := range eps {
			k := m.eps[e]
			if k == nil || placed[e] {
				return nil, false, nil
			}
			placed[e] = true
			var units []unitKey
			for _, u := range g {
				if slices.Contains(u.Episodes, e) {
					units = append(units, unitKey{u.File, u.RowGroup})
				}
			}
			if !slices.Equal(units, k.groupUnits) {
				return nil, false, nil
			}
			idx.runs[0] = append(idx.runs[0], order.Run{Episode: e, Start: pos, Len: k.n})
			for i := int64(0); i < k.n; i++ {
				idx.keep = append(idx.keep, k.bits[i/64]&(1<<(i%64)) != 0)
			}
			idx.stats.Frames += k.n
			idx.stats.Dropped += k.dropped
			idx.stats.Errors += k.errs
			pos += k.n
			if pos > order.MaxPositions {
				return nil, false, order.ErrTooManyPositions
			}
		}
	}
	idx.unitStart = append(idx.unitStart, pos)
	return idx, true, nil
}

// keepsEveryFrame reports whether rendering cfg's selection keeps every
// frame by construction, so that its keep index follows from metadata
// alone (metaKeepIndex). In --mode fallback a None render and a frame
// without language become the task fallback message, and a frame without
// a task passes through when it has no language; the only frame dropped
// is one that renders to None and has no task (its task_index has no
// text). So every frame is kept when the mode is fallback, every task of
// meta/tasks.parquet has a text, and a render failure fails the run
// (--on-error fail: no frame is skipped). A frame whose task_index is not
// in meta/tasks.parquet, which metadata cannot show, is refused by the
// reader (shard's frame checks), with the keep pass as without. Without
// a recipe nothing is rendered and every frame is kept.
func keepsEveryFrame(cfg *Config) bool {
	if cfg.Recipe == nil {
		return true
	}
	if cfg.Mode != render.ModeFallback || cfg.SkipErrors || len(cfg.Dataset.Tasks) == 0 {
		return false
	}
	for _, t := range cfg.Dataset.Tasks {
		if t.Text == "" {
			return false
		}
	}
	return true
}

// keepIndexOf returns the keep index of srcs: from metadata when every
// frame is kept by construction (keepsEveryFrame, metaKeepIndex), else by
// the keep pass (buildKeepIndex). pass forces the keep pass (tests).
func keepIndexOf(ctx context.Context, srcs []Mix, pass bool) (*keepIndex, error) {
	if !pass {
		idx, ok, err := metaKeepIndex(ctx, srcs)
		if err != nil || ok {
			return idx, err
		}
	}
	return buildKeepIndex(ctx, srcs)
}

// metaKeepIndex builds the keep index that buildKeepIndex would build,
// without reading a row group, when every frame is kept by construction
// (keepsEveryFrame): its positions are the frames of the plan's unit
// groups, each group holding its selected episodes in ascending order with
// their lengths from the episodes index. ok is false, and the caller runs
// the keep pass, when the plan cannot vouch for that: a unit read partially
// (it also holds frames of other episodes), a group whose row count
// differs from its episodes' indexed lengths, episodes out of order or in
// two groups. The rows served are checked against it (serveBatches).
func metaKeepIndex(ctx context.Context, srcs []Mix) (idx *keepIndex, ok bool, err error) {
	for _, m := range srcs {
		if !keepsEveryFrame(m.Config) {
			return nil, false, nil
		}
	}
	idx = &keepIndex{runs: make([][]order.Run, len(srcs)), meta: true}
	var pos int64
	for d, m := range srcs {
		c := *m.Config
		c.Share = Share{}
		p, err := newPlanner(&c)
		if err != nil {
			return nil, false, err
		}
		seen := map[int64]bool{}
		for {
			g, more, err := p.nextGroup(ctx)
			if err != nil {
				return nil, false, err
			}
			if !more {
				break
			}
			var eps, lens []int64
			var rows, n int64
			for _, u := range g {
				if u.Partial {
					return nil, false, nil
				}
				rows += u.Rows
				for _, e := range u.Episodes {
					if k := len(eps); k > 0 && eps[k-1] == e {
						continue
					}
					if seen[e] || (len(eps) > 0 && e < eps[len(eps)-1]) {
						return nil, false, nil
					}
					seen[e] = true
					eps = append(eps, e)
				}
			}
			for _, e := range eps {
				ep, found := c.Dataset.Episode(e)
				if !found {
					return nil, false, nil
				}
				lens = append(lens, ep.Length)
				n += ep.Length
			}
			if n != rows {
				return nil, false, nil
			}
			idx.units = append(idx.units, g)
			idx.src = append(idx.src, d)
			idx.unitStart = append(idx.unitStart, pos)
			for i, e := range eps {
				if lens[i] == 0 {
					continue
				}
				idx.runs[d] = append(idx.runs[d], order.Run{Episode: e, Start: pos, Len: lens[i]})
				pos += lens[i]
				if pos > order.MaxPositions {
					return nil, false, order.ErrTooManyPositions
				}
			}
		}
	}
	idx.unitStart = append(idx.unitStart, pos)
	idx.keep = make([]bool, pos)
	for i := range idx.keep {
		idx.keep[i] = true
	}
	idx.stats.Frames = pos
	return idx, true, nil
}

// checkRows reports, for a keep index built from metadata, whether rows
// [lo, hi) of source src's positions, read as chunk c, hold the episodes
// the index placed there: an episodes index that does not describe its
// data files is an error, never a shifted order.
func (x *keepIndex) checkRows(ds string, c *Chunk, src int, lo, hi int64) error {
	if !x.meta {
		return nil
	}
	runs := x.runs[src]
	i := sort.Search(len(runs), func(i int) bool { return runs[i].Start+runs[i].Len > lo })
	for p := lo; p < hi; p++ {
		for i < len(runs) && runs[i].Start+runs[i].Len <= p {
			i++
		}
		got := c.Batch.EpisodeIndex[p-lo]
		if i == len(runs) || runs[i].Start > p || runs[i].Episode != got {
			want := int64(-1)
			if i < len(runs) && runs[i].Start <= p {
				want = runs[i].Episode
			}
			return fmt.Errorf("%s: %s row group %d: index %d belongs to episode %d, the episodes index places episode %d there (meta/episodes does not describe the data files)", ds, c.Unit.File, c.Unit.RowGroup, c.Batch.Index[p-lo], got, want)
		}
	}
	return nil
}
