package validate

import (
	"context"
	"fmt"

	"github.com/lrstream/lrstream/shard"
)

// videos checks that every episode's video files exist and, with a probe,
// that they are long enough for the episode's to_timestamp.
func (v *validator) videos(ctx context.Context) {
	spans, err := shard.EpisodeVideos(ctx, v.src, v.ds)
	if err != nil {
		v.c.addErr(Error, CheckVideo, err)
		return
	}
	if len(spans) == 0 {
		v.checked("videos: none declared")
		return
	}
	v.checked("videos: every episode's video file present, from_timestamp < to_timestamp")
	names, err := v.src.List(ctx, "videos")
	if err != nil {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: "videos", Message: "cannot list the video files: " + err.Error()})
		return
	}
	if len(names) == 0 {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: "videos",
			Message: fmt.Sprintf("no video files: the dataset declares video features but has no videos/ directory (%d episode videos expected; lrstream streams without them, LeRobotDataset and camera decoding need them)", len(spans))})
		v.notChecked("video lengths: no video files")
		return
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	if v.opts.Probe != nil {
		v.checked("videos: long enough for their episodes' to_timestamp (ffprobe)")
	} else {
		v.notChecked("video lengths: " + v.opts.ProbeNote)
	}
	durations := map[string]float64{}
	probeFailed := map[string]bool{}
	frame := 1 / v.ds.Info.FPS
	for _, s := range spans {
		p, err := v.ds.Info.VideoFile(s.Key, s.Chunk, s.File)
		if err != nil {
			v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Column: "video_path", Message: err.Error()})
			return
		}
		ep := i64(s.Episode)
		if !(s.From >= 0 && s.To > s.From) {
			v.c.add(Finding{Severity: Error, Check: CheckVideo, File: s.IndexFile, Episode: ep, Column: "videos/" + s.Key,
				Message: fmt.Sprintf("from_timestamp %g, to_timestamp %g: want 0 <= from < to", s.From, s.To)})
		}
		if !have[p] {
			v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: p, Column: s.Key,
				Message: "video file missing (lrstream streams without it; LeRobotDataset and camera decoding need it)"})
			continue
		}
		if v.opts.Probe == nil || probeFailed[p] {
			continue
		}
		d, ok := durations[p]
		if !ok {
			var err error
			if d, err = v.opts.Probe(ctx, p); err != nil {
				probeFailed[p] = true
				v.c.add(Finding{Severity: Error, Check: CheckVideo, File: p, Column: s.Key, Message: "cannot read the video's duration: " + err.Error()})
				continue
			}
			durations[p] = d
		}
		if s.To > d+frame {
			v.c.add(Finding{Severity: Error, Check: CheckVideo, File: p, Episode: ep, Column: s.Key,
				Message: fmt.Sprintf("the episode ends at to_timestamp %.3f s, past the video's end (%.3f s)", s.To, d)})
		}
	}
}
