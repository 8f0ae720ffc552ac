package shard

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

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
}

// EpisodeVideos reads the video location of every episode and video
// feature from the episodes index (lrstream validate checks the files).
// An episode without the columns of a video feature is an error.
func EpisodeVideos(ctx context.Context, src fetch.Source, ds *schema.Dataset) ([]VideoSpan, error) {
	var keys []string
	for _, f := range ds.Info.Features {
		if f.DType == schema.DTypeVideo {
			keys = append(keys, f.Name)
		}
	}
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
		arrs, err := readSmallTable(ctx, src, name, cols)
		if err != nil {
			return nil, err
		}
		spans, err := videoSpans(arrs, keys, name)
		releaseAll(arrs)
		if err != nil {
			return nil, fileErr(src.ID(), name, err)
		}
		out = append(out, spans...)
	}
	return out, nil
}

func videoSpans(arrs map[string]arrow.Array, keys []string, name string) ([]VideoSpan, error) {
	eps, err := int64Values(arrs["episode_index"])
	if err != nil {
		return nil, fmt.Errorf("episode_index: %w", err)
	}
	var out []VideoSpan
	for _, k := range keys {
		get := func(c string) (arrow.Array, error) {
			a, ok := arrs["videos/"+k+"/"+c]
			if !ok {
				return nil, fmt.Errorf("video feature %s: missing column videos/%s/%s", k, k, c)
			}
			return a, nil
		}
		var ints [2][]int64
		for i, c := range []string{"chunk_index", "file_index"} {
			a, err := get(c)
			if err != nil {
				return nil, err
			}
			if ints[i], err = int64Values(a); err != nil {
				return nil, fmt.Errorf("videos/%s/%s: %w", k, c, err)
			}
		}
		var fl [2][]float64
		for i, c := range []string{"from_timestamp", "to_timestamp"} {
			a, err := get(c)
			if err != nil {
				return nil, err
			}
			if fl[i], err = floatValues(a); err != nil {
				return nil, fmt.Errorf("videos/%s/%s: %w", k, c, err)
			}
		}
		for i, e := range eps {
			out = append(out, VideoSpan{Episode: e, Key: k, Chunk: ints[0][i], File: ints[1][i], From: fl[0][i], To: fl[1][i], IndexFile: name})
		}
	}
	return out, nil
}

// floatValues converts a non-null float array to float64s.
func floatValues(a arrow.Array) ([]float64, error) {
	if a.NullN() > 0 {
		return nil, fmt.Errorf("%d null values", a.NullN())
	}
	switch a := a.(type) {
	case *array.Float64:
		return append([]float64(nil), a.Float64Values()...), nil
	case *array.Float32:
		out := make([]float64, a.Len())
		for i, v := range a.Float32Values() {
			out[i] = float64(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %s, want a float", a.DataType())
}
