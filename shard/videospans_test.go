package shard

import (
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// TestCheckVideoSpans: the episodes index's video ranges against the
// episodes' lengths and each other (issue 25 item 1: a range moved by one
// frame, two ranges swapped, or one pointed at [0, 0.9) streamed the
// neighbouring frames).
func TestCheckVideoSpans(t *testing.T) {
	const cam = "observation.images.top"
	ds := &schema.Dataset{ID: "ds", Info: schema.Info{FPS: 10, VideoPath: "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"}}
	lengths := []int64{12, 7, 9}
	var from int64
	for i, n := range lengths {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: int64(i), Length: n, FromIndex: from, ToIndex: from + n})
		from += n
	}
	// Episodes 0, 1, 2 back to back in file 0: [0, 1.2), [1.2, 1.9), [1.9, 2.8).
	good := func() []VideoSpan {
		return []VideoSpan{
			{Episode: 0, Key: cam, From: 0, To: 1.2, IndexFile: "meta/episodes/chunk-000/file-000.parquet"},
			{Episode: 1, Key: cam, From: 1.2, To: 1.9, IndexFile: "meta/episodes/chunk-000/file-000.parquet"},
			{Episode: 2, Key: cam, From: 1.9, To: 2.8, IndexFile: "meta/episodes/chunk-000/file-000.parquet"},
		}
	}
	tests := []struct {
		name string
		edit func(s []VideoSpan)
		want []string // substrings of the first error; nil: none
	}{
		{"consistent", func([]VideoSpan) {}, nil},
		{"last frame's timestamp as to (converted datasets)", func(s []VideoSpan) {
			s[0].To, s[1].To, s[2].To = 1.1, 1.8, 2.7
		}, nil},
		{"float rounding", func(s []VideoSpan) { s[1].From, s[1].To = 1.2000000001, 1.8999999 }, nil},
		{"moved by one frame", func(s []VideoSpan) { s[1].From, s[1].To = 1.3, 2.0 },
			[]string{"episode 2", "overlaps episode 1's [1.3, 2)", "camera " + cam, "videos/" + cam + "/chunk-000/file-000.mp4"}},
		{"swapped", func(s []VideoSpan) { s[1].From, s[1].To, s[2].From, s[2].To = s[2].From, s[2].To, s[1].From, s[1].To },
			[]string{"episode 1", "is 0.9 s = 9 frames at 10 fps, but the episode has 7 frames"}},
		{"pointed at [0, 0.9)", func(s []VideoSpan) { s[2].From, s[2].To = 0, 0.9 },
			[]string{"overlaps episode 0's [0, 1.2)"}},
		{"one frame long", func(s []VideoSpan) { s[2].To = 2.9 }, []string{"episode 2", "but the episode has 9 frames"}},
		{"to before from", func(s []VideoSpan) { s[2].To = 1.0 }, []string{"want 0 <= from < to"}},
		{"negative", func(s []VideoSpan) { s[0].From = -0.1 }, []string{"episode 0", "want 0 <= from < to"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.edit(s)
			errs := CheckVideoSpans(ds, s, nil, 1e-4)
			if tc.want == nil {
				if len(errs) > 0 {
					t.Fatalf("errors %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(errs[0].Error(), w) {
					t.Fatalf("error %q does not say %q", errs[0], w)
				}
			}
			if !strings.Contains(errs[0].Error(), "meta/episodes/chunk-000/file-000.parquet") || !strings.Contains(errs[0].Error(), "column videos/"+cam+"/") {
				t.Fatalf("error %q does not locate it in the index", errs[0])
			}
		})
	}
	// Another camera's spans are not checked when keys leave it out; a
	// file of another camera is another file.
	s := good()
	s[1].Key = "other"
	if errs := CheckVideoSpans(ds, s, []string{cam}, 1e-4); len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
}
