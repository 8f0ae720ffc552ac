package prerender

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Finalize merges the per-rank indexes of a multi-rank pre-render in dir
// (rankNNNNN-index.json, one per rank, as written by Run with WorldSize >
// 1) into dir/index.json, which Replay and Verify read. It refuses, naming
// the ranks involved, when a rank is missing, duplicated or incomplete,
// when the ranks' runs differ (dataset, revision, recipe, options, shard
// size, version, world size), when their episode shares overlap or do not
// cover the selection, or when a shard file is missing. Finalizing again
// writes the same index.json.
func Finalize(dir string) (*Index, error) {
	files, ranks, err := readRankIndexes(dir)
	if err != nil {
		return nil, err
	}
	base := ranks[0]
	w := base.WorldSize
	if w < 2 {
		return nil, fmt.Errorf("finalize: %s has world size %d", filepath.Base(files[0]), w)
	}
	byRank, err := indexesByRank(files, ranks, w)
	if err != nil {
		return nil, err
	}
	if err := checkRanksDone(dir, byRank); err != nil {
		return nil, err
	}
	if err := checkShares(byRank); err != nil {
		return nil, fmt.Errorf("finalize: %s: %w", dir, err)
	}
	out, err := mergeRanks(dir, base, byRank)
	if err != nil {
		return nil, err
	}
	data, err := out.encode()
	if err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	if err := writeAtomic(dir, IndexFile, data); err != nil {
		return nil, fmt.Errorf("finalize: %w", err)
	}
	return out, nil
}

// readRankIndexes reads the per-rank indexes of dir (at least one), each
// describing its own rank alone, all of the same run.
func readRankIndexes(dir string) (files []string, ranks []*Index, err error) {
	files, err = rankIndexes(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("finalize: %w", err)
	}
	if len(files) == 0 {
		if x, err := readIndexFile(filepath.Join(dir, IndexFile)); err == nil && x.WorldSize == 1 {
			return nil, nil, fmt.Errorf("finalize: %s holds a single-process pre-render: nothing to finalize", dir)
		}
		return nil, nil, fmt.Errorf("finalize: %s holds no per-rank indexes (rankNNNNN-index.json)", dir)
	}
	for _, f := range files {
		x, err := readIndexFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("finalize: %w", err)
		}
		if len(x.Ranks) != 1 || x.Ranks[0].Rank != rankOfIndex(f) {
			return nil, nil, fmt.Errorf("finalize: %s does not describe rank %d alone", filepath.Base(f), rankOfIndex(f))
		}
		ranks = append(ranks, x)
	}
	base := ranks[0]
	for i, x := range ranks[1:] {
		if d := differences(base, x); len(d) > 0 {
			return nil, nil, fmt.Errorf("finalize: %s and %s are different runs:\n  %s",
				filepath.Base(files[0]), filepath.Base(files[i+1]), strings.Join(d, "\n  "))
		}
	}
	return files, ranks, nil
}

// indexesByRank places each rank's index (read from files) at its rank
// of w, refusing ranks out of range or twice.
func indexesByRank(files []string, ranks []*Index, w int) ([]*Index, error) {
	byRank := make([]*Index, w)
	for i, x := range ranks {
		r := x.Ranks[0].Rank
		if r < 0 || r >= w {
			return nil, fmt.Errorf("finalize: %s is rank %d of %d", filepath.Base(files[i]), r, w)
		}
		if byRank[r] != nil {
			return nil, fmt.Errorf("finalize: rank %d appears twice", r)
		}
		byRank[r] = x
	}
	return byRank, nil
}

// checkRanksDone refuses missing or incomplete ranks, naming them.
func checkRanksDone(dir string, byRank []*Index) error {
	w := len(byRank)
	var missing, incomplete []string
	firstMissing := -1
	for r, x := range byRank {
		switch {
		case x == nil:
			if firstMissing < 0 {
				firstMissing = r
			}
			missing = append(missing, fmt.Sprint(r))
		case !x.Complete || !x.Ranks[0].Complete:
			incomplete = append(incomplete, fmt.Sprint(r))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("finalize: %s: rank(s) %s of %d missing (no %s); run them, or copy their files here",
			dir, strings.Join(missing, ", "), w, indexName(rankPrefix(firstMissing, w)))
	}
	if len(incomplete) > 0 {
		return fmt.Errorf("finalize: %s: rank(s) %s of %d incomplete (interrupted or still running); run them again to finish",
			dir, strings.Join(incomplete, ", "), w)
	}
	return nil
}

// mergeRanks returns the merged index: base's run, every rank's shards
// (checked on disk) in rank order, the feature schema of the first rank
// with batches (the others must agree), complete and recounted.
func mergeRanks(dir string, base *Index, byRank []*Index) (*Index, error) {
	out := *base
	out.Ranks = nil
	out.Shards = []Shard{}
	schemaFrom := -1
	for r, x := range byRank {
		if x.Ranks[0].Batches > 0 {
			if schemaFrom < 0 {
				schemaFrom = r
				out.Features, out.Strings, out.Components = x.Features, x.Strings, x.Components
				out.FPS = x.FPS
			} else if !sameSchema(byRank[schemaFrom], x) {
				return nil, fmt.Errorf("finalize: ranks %d and %d have different feature schemas", schemaFrom, r)
			}
		}
		if err := checkShardFiles(dir, x.Shards); err != nil {
			return nil, fmt.Errorf("finalize: rank %d: %w", r, err)
		}
		out.Ranks = append(out.Ranks, x.Ranks[0])
		out.Shards = append(out.Shards, x.Shards...)
	}
	out.Complete = true
	out.recount()
	return &out, nil
}

func sameSchema(a, b *Index) bool {
	if len(a.Features) != len(b.Features) || !slices.Equal(a.Strings, b.Strings) || !slices.Equal(a.Components, b.Components) {
		return false
	}
	for i := range a.Features {
		fa, fb := a.Features[i], b.Features[i]
		if fa.Name != fb.Name || fa.DType != fb.DType || !slices.Equal(fa.Shape, fb.Shape) {
			return false
		}
	}
	return true
}

// checkShares checks that the ranks' episode shares are disjoint, cover
// the selection, and that each rank's shards stay within its share.
func checkShares(byRank []*Index) error {
	type span struct {
		lo, hi int64
		rank   int
	}
	var spans []span
	var count int64
	for r, x := range byRank {
		rk := x.Ranks[0]
		var n int64
		for _, e := range rk.Episodes {
			spans = append(spans, span{e[0], e[1], r})
			n += e[1] - e[0] + 1
		}
		if n != rk.EpisodeCount {
			return fmt.Errorf("rank %d lists %d episodes in its ranges but counts %d", r, n, rk.EpisodeCount)
		}
		count += n
		// The episodes its shards hold must lie in its share.
		for _, s := range x.Shards {
			if s.Samples == 0 {
				continue
			}
			if !inRanges(rk.Episodes, s.FirstEpisode) || !inRanges(rk.Episodes, s.LastEpisode) {
				return fmt.Errorf("rank %d: shard %s holds episodes %d..%d, outside its share", r, s.File, s.FirstEpisode, s.LastEpisode)
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if p, q := spans[i-1], spans[i]; q.lo <= p.hi {
			return fmt.Errorf("ranks %d and %d overlap: both have episodes %d..%d", p.rank, q.rank, q.lo, min(p.hi, q.hi))
		}
	}
	// The episodes the ranks' shards hold must not overlap either (each
	// rank's share is one contiguous run of episodes).
	spans = spans[:0]
	for r, x := range byRank {
		sp := span{lo: -1, rank: r}
		for _, s := range x.Shards {
			if s.Samples == 0 {
				continue
			}
			if sp.lo < 0 || s.FirstEpisode < sp.lo {
				sp.lo = s.FirstEpisode
			}
			sp.hi = max(sp.hi, s.LastEpisode)
		}
		if sp.lo >= 0 {
			spans = append(spans, sp)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if p, q := spans[i-1], spans[i]; q.lo <= p.hi {
			return fmt.Errorf("the shards of ranks %d and %d overlap: both hold episodes in %d..%d", p.rank, q.rank, q.lo, min(p.hi, q.hi))
		}
	}
	if want := byRank[0].Selection.Episodes; count != want {
		return fmt.Errorf("the ranks' shares hold %d episodes, the selection %d", count, want)
	}
	return nil
}

func inRanges(rs [][2]int64, e int64) bool {
	for _, r := range rs {
		if e >= r[0] && e <= r[1] {
			return true
		}
	}
	return false
}
