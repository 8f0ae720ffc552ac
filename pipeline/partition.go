package pipeline

import (
	"slices"

	"github.com/lrstream/lrstream/shard"
)

// episodeSelection is the selection of exactly eps, as ranges of
// consecutive episodes; no episode gives a selection of nothing (an empty
// Episodes list would mean everything).
func episodeSelection(eps []int64) shard.Selection {
	s := slices.Clone(eps)
	slices.Sort(s)
	out := shard.Selection{Episodes: shard.Ranges{}}
	for _, e := range s {
		if k := len(out.Episodes); k > 0 && out.Episodes[k-1].Hi+1 == e {
			out.Episodes[k-1].Hi = e
			continue
		}
		out.Episodes = append(out.Episodes, shard.Range{Lo: e, Hi: e})
	}
	if len(out.Episodes) == 0 {
		out.Episodes = shard.Ranges{{Lo: -1, Hi: -1}}
	}
	return out
}
