package validate

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// videos checks the dataset's video cameras as stream would use them:
// the features' shapes (what --cameras all refuses), the episodes index's
// ranges (shard.CheckVideoSpans, stream's startup check), which files are
// present (--cameras auto's rule, through info.json's video_path), and
// with a local dataset and ffprobe, each present file's stream against
// the index (video.CheckStream, the check stream runs before using a
// file) and every packet demuxed; with Deep, every frame decoded.
func (v *validator) videos(ctx context.Context) {
	keys := video.Keys(&v.ds.Info)
	v.cameraShapes()
	if len(keys) == 0 {
		v.checked("videos: none declared")
		return
	}
	spans, err := shard.EpisodeVideos(ctx, v.src, v.ds)
	if err != nil {
		v.c.addErr(Error, CheckVideo, err)
		return
	}
	v.checked("videos: every episode's range in its video file matches its length (within a frame) and overlaps no other episode's in the same file")
	for _, err := range shard.CheckVideoSpans(v.ds, spans, nil, video.DefaultTolerance) {
		v.c.addErr(Error, CheckVideo, err)
	}
	present := v.videoPresence(ctx, keys, spans)
	if len(present) == 0 {
		v.notChecked("video files: none present")
		return
	}
	if v.opts.Video == nil {
		v.notChecked("video files' streams (frame rate, size, length): " + v.opts.VideoNote)
		return
	}
	v.checked("videos: each file's frame rate and time base match fps, its frames have info.json's size, it lasts to its last episode's end with no frame of slack, every packet can be read (ffprobe)")
	if v.opts.Deep {
		v.checked("videos (--deep): every frame of every file decoded; every episode's frames found at from_timestamp + k/fps within tolerance_s")
	} else {
		v.notChecked("video frames: not decoded (--deep decodes every frame: damaged media bytes are found only so)")
	}
	needs := video.NeedsFor(&v.ds.Info, spans)
	for _, f := range present {
		if ctx.Err() != nil {
			return
		}
		v.videoFile(ctx, f, needs[f.name], spans)
	}
}

// cameraShapes reports the cameras stream refuses to decode from their
// info.json shape (as --cameras all would at startup).
func (v *validator) cameraShapes() {
	info := &v.ds.Info
	for _, k := range video.Keys(info) {
		if _, err := video.NewSet(nil, info, nil, []string{k}, 0, 0, video.DefaultTolerance, nil); err != nil {
			v.c.add(Finding{Severity: Error, Check: CheckVideo, File: shard.InfoPath, Column: k, Message: err.Error() + " (stream cannot decode this camera)"})
		}
	}
	for _, k := range video.ImageKeys(info) {
		if _, err := imageCamera(info, k); err != nil {
			v.c.add(Finding{Severity: Error, Check: CheckImage, File: shard.InfoPath, Column: k, Message: err.Error() + " (stream cannot decode this camera)"})
		}
	}
}

// videoFileRef is a present video file of a camera.
type videoFileRef struct{ key, name string }

// videoPresence reports, per camera, which of its video files (every
// episode's, located by info.json's video_path) are absent, as --cameras
// auto decides: none present, a warning (auto leaves the camera out);
// some, an error (auto and all refuse it). It returns the present files.
func (v *validator) videoPresence(ctx context.Context, keys []string, spans []shard.VideoSpan) []videoFileRef {
	v.checked("videos: every episode's video file present (info.json video_path); a camera has all its files or none")
	exists := video.FileExists(ctx, v.src)
	files := map[string][]string{}
	seen := map[string]bool{}
	for _, sp := range spans {
		name, err := v.ds.Info.VideoFile(sp.Key, sp.Chunk, sp.File)
		if err != nil {
			v.c.add(Finding{Severity: Error, Check: CheckInfo, File: shard.InfoPath, Column: "video_path", Message: err.Error()})
			return nil
		}
		if !seen[name] {
			seen[name] = true
			files[sp.Key] = append(files[sp.Key], name)
		}
	}
	var present []videoFileRef
	for _, k := range keys {
		var missing []string
		for _, name := range files[k] {
			if exists(name) {
				present = append(present, videoFileRef{k, name})
			} else {
				missing = append(missing, name)
			}
		}
		switch n := len(files[k]); {
		case n == 0:
			v.c.add(Finding{Severity: Warning, Check: CheckVideo, Column: k, Message: "no video files: the episodes index locates no video of this camera"})
		case len(missing) == n:
			v.c.add(Finding{Severity: Warning, Check: CheckVideo, Column: k, File: missing[0],
				Message: fmt.Sprintf("no video files: none of the camera's %d video files is present (lrstream --cameras auto streams without the camera, with a warning; --cameras all refuses; LeRobotDataset needs them)", n)})
		default:
			for _, m := range missing {
				v.c.add(Finding{Severity: Error, Check: CheckVideo, Column: k, File: m,
					Message: fmt.Sprintf("video file missing while %d of the camera's %d files are present: lrstream --cameras auto and all refuse the camera (a partial copy)", n-len(missing), n)})
			}
		}
	}
	return present
}

// videoFile checks one present video file: its stream against what its
// episodes need (the check stream runs before using it), its packets,
// and with Deep its frames.
func (v *validator) videoFile(ctx context.Context, f videoFileRef, need video.FileNeeds, spans []shard.VideoSpan) {
	ff := v.opts.Video
	path, release, err := fetch.Materialize(ctx, v.src, f.name)
	if err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckVideo, File: f.name, Column: f.key, Message: "cannot read the video file: " + err.Error()})
		return
	}
	defer release()
	bad := func(msg string) {
		v.c.add(Finding{Severity: Error, Check: CheckVideo, File: f.name, Column: f.key, Message: msg})
	}
	si, err := ff.ProbeStream(ctx, path)
	if err != nil {
		bad("cannot read the video: " + err.Error())
		return
	}
	if err := video.CheckStream(si, need, video.DefaultTolerance); err != nil {
		bad(err.Error() + " (stream refuses every frame of this file)")
		return
	}
	v.backendNote(f, si)
	start := si.Start
	if math.IsNaN(start) {
		start = 0
	}
	want := int64(math.Round((need.End - start) * need.FPS))
	n, problems, err := ff.CountPackets(ctx, path)
	switch {
	case err != nil:
		bad("cannot read the video's packets: " + err.Error())
		return
	case n < want:
		bad(fmt.Sprintf("only %d of the video's packets can be read, its episodes need %d frames: the file is cut short or damaged (stream fails at the first frame past the break)", n, want))
		return
	case problems != "":
		bad(fmt.Sprintf("reading the video's packets, ffprobe reports: %s: the file is cut short or damaged (stream fails there)", strings.ReplaceAll(problems, "\n", " | ")))
		return
	}
	if extra := n - want; extra > 0 {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: f.name, Column: f.key,
			Message: fmt.Sprintf("the video holds %d frame(s) past the end of its last episode: frames the episodes index does not account for (harmless at the end of the file; a frame duplicated in the middle would give every later frame its predecessor's pixels)", extra)})
	}
	if v.opts.Deep {
		v.decodeFile(ctx, f, path, need, spans)
	}
}

// decodeFile decodes every frame of a video file (scaled down: the
// pixels are not looked at, the decoder's errors are) and checks that
// each episode in it has a frame at from_timestamp + k/fps within
// tolerance_s for each of its frames k, as stream would look them up.
func (v *validator) decodeFile(ctx context.Context, f videoFileRef, path string, need video.FileNeeds, spans []shard.VideoSpan) {
	var pts []float64
	err := v.opts.Video.Decode(ctx, video.Segment{Path: path, Start: 0, End: math.Inf(1), Width: 16, Height: 16}, func(fr video.Frame) error {
		pts = append(pts, fr.PTS)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		v.c.add(Finding{Severity: Error, Check: CheckVideo, File: f.name, Column: f.key,
			Message: fmt.Sprintf("decoding fails after %d frames: %v (stream fails there)", len(pts), err)})
		return
	}
	sort.Float64s(pts)
	tol := video.DefaultTolerance
	for _, sp := range spans {
		if sp.Key != f.key {
			continue
		}
		if name, _ := v.ds.Info.VideoFile(sp.Key, sp.Chunk, sp.File); name != f.name {
			continue
		}
		var missed []string
		for k := int64(0); k < sp.Length; k++ {
			q := sp.From + float64(k)/need.FPS
			i := sort.SearchFloat64s(pts, q)
			best := math.Inf(1)
			for _, j := range []int{i - 1, i} {
				if j >= 0 && j < len(pts) {
					best = min(best, math.Abs(pts[j]-q))
				}
			}
			if best >= tol {
				missed = append(missed, fmt.Sprint(k))
			}
		}
		if count := len(missed); count > 0 {
			if len(missed) > 5 {
				missed = append(missed[:5], "…")
			}
			v.c.add(Finding{Severity: Error, Check: CheckVideo, File: f.name, Episode: i64(sp.Episode), Column: f.key, Count: count,
				Message: fmt.Sprintf("no decoded frame within tolerance_s of from_timestamp + k/fps for frame(s) %s of the episode", strings.Join(missed, ", "))})
		}
	}
}

// backendNote reports, once a camera, an RGB camera's video on which
// LeRobot's two decoding backends give different pixels (video.BackendsDiffer):
// which one a training run reproduces is then a choice (--video-backend).
func (v *validator) backendNote(f videoFileRef, si video.StreamInfo) {
	why, differ := video.BackendsDiffer(si)
	if !differ || v.backendNoted[f.key] {
		return
	}
	if ft, ok := v.ds.Info.Feature(f.key); !ok || video.IsDepth(ft) {
		return // LeRobot decodes depth cameras with PyAV whatever its backend
	}
	if v.backendNoted == nil {
		v.backendNoted = map[string]bool{}
	}
	v.backendNoted[f.key] = true
	v.c.add(Finding{Severity: Info, Check: CheckVideo, File: f.name, Column: f.key,
		Message: why + ": LeRobot's torchcodec and pyav backends decode its frames to different pixels; lrstream gives torchcodec's (LeRobot's default) or, with --video-backend pyav, PyAV's (docs/video.md, Which LeRobot backend)"})
}
