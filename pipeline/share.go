package pipeline

import (
	"fmt"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// shareSelection narrows sel to share's episodes. The selected episodes, in
// index order, are cut into NumWorkers contiguous runs of about equal frame
// counts, so each worker reads its own files and row groups; worker w gets
// run w. Every selected episode is in exactly one run.
func shareSelection(ds *schema.Dataset, sel shard.Selection, sh Share) (shard.Selection, error) {
	if sh.NumWorkers <= 1 && sh.Worker == 0 {
		return sel, nil
	}
	if sh.NumWorkers < 1 || sh.Worker < 0 || sh.Worker >= sh.NumWorkers {
		return sel, fmt.Errorf("invalid share: worker %d of %d", sh.Worker, sh.NumWorkers)
	}
	return episodeSelection(ShareEpisodes(ds, sel, sh)), nil
}

// ShareEpisodes returns the episode indices of share sh of the selection,
// ascending.
func ShareEpisodes(ds *schema.Dataset, sel shard.Selection, sh Share) []int64 {
	var eps []int64
	var lens []int64
	var total int64
	for _, e := range ds.Episodes {
		if sel.Contains(e.Index) {
			eps = append(eps, e.Index)
			lens = append(lens, e.Length)
			total += e.Length
		}
	}
	n := int64(max(sh.NumWorkers, 1))
	var out []int64
	var acc int64
	for i, e := range eps {
		// The run an episode belongs to is decided by the frame count
		// before its midpoint, so runs split at episode boundaries near
		// total*w/n.
		mid := acc + lens[i]/2
		w := int64(0)
		if total > 0 {
			w = mid * n / total
		} else {
			w = int64(i) * n / int64(len(eps))
		}
		if w >= n {
			w = n - 1
		}
		if w == int64(sh.Worker) {
			out = append(out, e)
		}
		acc += lens[i]
	}
	return out
}

// SelectedFrames returns the number of frames in cfg's selection and share,
// from the episodes index (for progress displays).
func SelectedFrames(cfg *Config) int64 {
	sh := cfg.Share
	if sh.NumWorkers < 1 {
		sh.NumWorkers = 1
	}
	var n int64
	in := map[int64]bool{}
	for _, e := range ShareEpisodes(cfg.Dataset, cfg.Selection, sh) {
		in[e] = true
	}
	for _, e := range cfg.Dataset.Episodes {
		if in[e.Index] {
			n += e.Length
		}
	}
	return n
}
