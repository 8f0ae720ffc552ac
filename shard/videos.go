package shard

import (
	"context"
	"fmt"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// VideoSpan locates one episode's frames of one camera: the episodes
// index's videos/KEY/{chunk_index,file_index,from_timestamp,to_timestamp}.
type VideoSpan struct {
	Episode int64
	// Key is the video feature (e.g. observation.images.top).
	Key         string
	Chunk, File int64
	// From and To delimit the episode in the video file, in seconds.
	From, To float64
	// IndexFile is the meta/episodes file listing it.
	IndexFile string
	// Length is the episode's number of frames (its index range; 0 when
	// the episode is not in the dataset's index).
	Length int64
}

// EpisodeVideos reads the video location of every episode and video
// feature from the episodes index (lrstream validate checks the files).
// An episode without the columns of a video feature is an error.
func EpisodeVideos(ctx context.Context, src fetch.Source, ds *schema.Dataset) ([]VideoSpan, error) {
	keys := ds.Info.FeatureNames(schema.DTypeVideo)
	if len(keys) == 0 {
		return nil, nil
	}
	names, err := src.List(ctx, EpisodesDir)
	if err != nil {
		return nil, fileErr(src.ID(), EpisodesDir, err)
	}
	var out []VideoSpan
	for _, name := range names {
		if !strings.HasSuffix(name, ".parquet") {
			continue
		}
		cols := []string{"episode_index"}
		for _, k := range keys {
			for _, c := range []string{"chunk_index", "file_index", "from_timestamp", "to_timestamp"} {
				cols = append(cols, "videos/"+k+"/"+c)
			}
		}
		p, err := openTable(ctx, src, name, cols)
		if err != nil {
			return nil, err
		}
		spans, err := videoSpans(p, keys, name)
		p.Close()
		if err != nil {
			return nil, fileErr(src.ID(), name, err)
		}
		out = append(out, spans...)
	}
	length := make(map[int64]int64, len(ds.Episodes))
	for _, e := range ds.Episodes {
		length[e.Index] = e.ToIndex - e.FromIndex
	}
	for i := range out {
		out[i].Length = length[out[i].Episode]
	}
	return out, nil
}

func videoSpans(p *pfile, keys []string, name string) ([]VideoSpan, error) {
	rgs := p.allRowGroups()
	eps, err := p.readInts("episode_index", rgs)
	if err != nil {
		return nil, fmt.Errorf("episode_index: %w", err)
	}
	var out []VideoSpan
	for _, k := range keys {
		col := func(c string) (string, error) {
			n := "videos/" + k + "/" + c
			if !p.has(n) {
				return "", fmt.Errorf("video feature %s: missing column %s", k, n)
			}
			return n, nil
		}
		var ints [2][]int64
		for i, c := range []string{"chunk_index", "file_index"} {
			n, err := col(c)
			if err != nil {
				return nil, err
			}
			if ints[i], err = p.readInts(n, rgs); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
		}
		var fl [2][]float64
		for i, c := range []string{"from_timestamp", "to_timestamp"} {
			n, err := col(c)
			if err != nil {
				return nil, err
			}
			if fl[i], err = p.readFloats(n); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
		}
		for i, e := range eps {
			out = append(out, VideoSpan{Episode: e, Key: k, Chunk: ints[0][i], File: ints[1][i], From: fl[0][i], To: fl[1][i], IndexFile: name})
		}
	}
	return out, nil
}
