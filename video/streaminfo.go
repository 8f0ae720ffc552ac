package video

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// StreamInfo describes the first video stream of a file as its container
// states it (ffprobe; nothing is decoded). Unknown values are zero
// (rates, time base), NaN (Start, Duration) or -1 (Frames).
type StreamInfo struct {
	Width, Height                  int
	PixFmt, ColorSpace, ColorRange string
	// FrameRate is the stream's real base frame rate (r_frame_rate: the
	// rate all its timestamps are multiples of), AvgFrameRate its frames
	// over its duration, TimeBase the unit of its timestamps; each a
	// fraction {num, den}.
	FrameRate, AvgFrameRate, TimeBase [2]int64
	// Start is the first timestamp (s); Duration the stream's duration
	// (s; the container's when the stream states none).
	Start, Duration float64
	// Frames is the number of frames the container lists (nb_frames).
	Frames int64
}

// StreamProber is a Decoder that can describe a video file's stream
// without decoding it. Set checks every file it decodes against the
// dataset with it (CheckStream) before the file's first frame is used.
type StreamProber interface {
	ProbeStream(ctx context.Context, path string) (StreamInfo, error)
}

// errNoProbe is ProbeStream's error without ffprobe.
var errNoProbe = errors.New("ffprobe not found: lrstream checks each video file's frame rate, time base, size and length with FFmpeg's ffprobe before using its frames (install FFmpeg's ffprobe beside ffmpeg)")

// ProbeStream implements StreamProber with ffprobe, once per path (later
// calls return the first answer).
func (d *FFmpeg) ProbeStream(ctx context.Context, path string) (StreamInfo, error) {
	if d.Probe == "" {
		return StreamInfo{}, errNoProbe
	}
	d.mu.Lock()
	if d.streams == nil || len(d.streams) >= maxProbes {
		d.streams = map[string]*lazyStream{}
	}
	e := d.streams[path]
	if e == nil {
		e = &lazyStream{done: make(chan struct{})}
		d.streams[path] = e
		d.mu.Unlock()
		e.info, e.err = d.runProbe(ctx, path)
		if ctx.Err() != nil {
			d.mu.Lock()
			if d.streams[path] == e {
				delete(d.streams, path) // cancelled: a later call probes again
			}
			d.mu.Unlock()
		}
		close(e.done)
		return e.info, e.err
	}
	d.mu.Unlock()
	select {
	case <-e.done:
		return e.info, e.err
	case <-ctx.Done():
		return StreamInfo{}, ctx.Err()
	}
}

// probeCommand is the ffprobe process of ProbeStream and CountPackets:
// Command, with an environment stripped of credentials (env.go).
func probeCommand(ctx context.Context, path string, args ...string) *exec.Cmd {
	return Command(ctx, path, args...)
}

// lazyStream is one ProbeStream answer, shared: done is closed when set.
type lazyStream struct {
	done chan struct{}
	info StreamInfo
	err  error
}

// probeEntries are the fields ProbeStream asks ffprobe for.
const probeEntries = "stream=codec_type,pix_fmt,width,height,color_space,color_range,r_frame_rate,avg_frame_rate,time_base,start_time,duration,nb_frames:format=duration"

func (d *FFmpeg) runProbe(ctx context.Context, path string) (StreamInfo, error) {
	cmd := probeCommand(ctx, d.Probe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", probeEntries, "-of", "json", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return StreamInfo{}, ctx.Err()
		}
		return StreamInfo{}, fmt.Errorf("ffprobe: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return parseStreamInfo(out)
}

// parseStreamInfo reads ffprobe's JSON report (probeEntries) of a file's
// first video stream.
func parseStreamInfo(out []byte) (StreamInfo, error) {
	var r struct {
		Streams []struct {
			CodecType    string `json:"codec_type"`
			PixFmt       string `json:"pix_fmt"`
			Width        int    `json:"width"`
			Height       int    `json:"height"`
			ColorSpace   string `json:"color_space"`
			ColorRange   string `json:"color_range"`
			RFrameRate   string `json:"r_frame_rate"`
			AvgFrameRate string `json:"avg_frame_rate"`
			TimeBase     string `json:"time_base"`
			StartTime    string `json:"start_time"`
			Duration     string `json:"duration"`
			NbFrames     string `json:"nb_frames"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return StreamInfo{}, fmt.Errorf("ffprobe's report: %w", err)
	}
	if len(r.Streams) != 1 || (r.Streams[0].CodecType != "" && r.Streams[0].CodecType != "video") {
		return StreamInfo{}, errors.New("the file has no video stream")
	}
	st := r.Streams[0]
	si := StreamInfo{Width: st.Width, Height: st.Height, PixFmt: st.PixFmt, ColorSpace: st.ColorSpace, ColorRange: st.ColorRange,
		FrameRate: fraction(st.RFrameRate), AvgFrameRate: fraction(st.AvgFrameRate), TimeBase: fraction(st.TimeBase),
		Start: seconds(st.StartTime), Duration: seconds(st.Duration), Frames: -1}
	if math.IsNaN(si.Duration) {
		si.Duration = seconds(r.Format.Duration)
	}
	if n, err := strconv.ParseInt(st.NbFrames, 10, 64); err == nil && n >= 0 {
		si.Frames = n
	}
	return si, nil
}

// fraction parses "N/D" with N, D > 0 ({0, 0} otherwise: unknown).
func fraction(s string) [2]int64 {
	n, d, ok := strings.Cut(s, "/")
	num, err1 := strconv.ParseInt(n, 10, 64)
	den, err2 := strconv.ParseInt(d, 10, 64)
	if !ok || err1 != nil || err2 != nil || num <= 0 || den <= 0 || num > 1<<40 || den > 1<<40 {
		return [2]int64{}
	}
	return [2]int64{num, den}
}

// seconds parses a finite, non-negative number of seconds (NaN otherwise,
// as for ffprobe's "N/A").
func seconds(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return math.NaN()
	}
	return v
}

// FileNeeds is what a dataset's episodes need of one video file: the
// frame size (zero: any, with --resize), the episodes' frame rate (fps of
// info.json), and the end of the last episode in it (the latest
// from_timestamp + length / fps over the episodes the index puts there).
type FileNeeds struct {
	Width, Height int
	FPS           float64
	End           float64
}

// CheckStream checks a video file's stream against what the dataset
// needs of it, so that no frame of a file that cannot be right is used:
//
//   - its frame rate is info.json's fps: r_frame_rate or avg_frame_rate
//     within tol per frame (a file whose timestamps are scaled gives
//     every other query a frame of another time, within tolerance);
//   - its time base can hold frames 1/fps apart within tol;
//   - its frames have the size info.json says (unless resized);
//   - it lasts to the end of its last episode, with no frame of slack:
//     start + frames / fps (start + duration when the container states
//     no frame count) reaches End - tol (a file one frame short has every
//     frame after the missing one shifted, with timestamps that still
//     match).
//
// tol is LeRobot's tolerance_s.
func CheckStream(si StreamInfo, need FileNeeds, tol float64) error {
	fps := need.FPS
	if !(fps > 0) {
		return nil
	}
	if rate, ok := rateMatches(si, fps, tol); !ok {
		return fmt.Errorf("the video's frame rate (%s) is not info.json's fps %g: its frames are not 1/fps apart", rate, fps)
	}
	if tb := si.TimeBase; tb[0] > 0 {
		unit := float64(tb[0]) / float64(tb[1])
		ticks := float64(tb[1]) / (float64(tb[0]) * fps)
		if unit/2 >= tol && math.Abs(ticks-math.Round(ticks)) > 1e-6*ticks {
			return fmt.Errorf("the video's time base %d/%d s cannot hold frames 1/%g s apart within tolerance_s %g", tb[0], tb[1], fps, tol)
		}
	}
	if need.Width > 0 && (si.Width != need.Width || si.Height != need.Height) {
		return fmt.Errorf("the video's frames are %dx%d, info.json says %dx%d (use --resize HxW to resize)", si.Width, si.Height, need.Width, need.Height)
	}
	start := si.Start
	if math.IsNaN(start) {
		start = 0
	}
	// The frame count when the container states it (mp4 always does):
	// a duration may or may not include the last frame's own duration
	// depending on the writer, a count is exact. Else the duration.
	switch {
	case si.Frames >= 0:
		if start+float64(si.Frames)/fps < need.End-tol {
			return fmt.Errorf("the video has %d frames, its episodes need %d (to %.6f s per the episodes index): it is %d frame(s) short",
				si.Frames, int64(math.Round((need.End-start)*fps)), need.End, int64(math.Round((need.End-start)*fps))-si.Frames)
		}
	case !math.IsNaN(si.Duration):
		if start+si.Duration < need.End-tol {
			return fmt.Errorf("the video ends at %.6f s (%d frames at %g fps), before its last episode does (%.6f s per the episodes index): it is %d frame(s) short",
				start+si.Duration, int64(math.Round(si.Duration*fps)), fps, need.End, int64(math.Round((need.End-start-si.Duration)*fps)))
		}
	default:
		return errors.New("the container states neither the video's duration nor its frame count: its length cannot be checked against the episodes index")
	}
	return nil
}

// rateMatches says whether one of the stream's frame rates is fps
// within tol per frame (true when neither is known), and the rates for
// an error.
func rateMatches(si StreamInfo, fps, tol float64) (string, bool) {
	var known []string
	for i, r := range [][2]int64{si.FrameRate, si.AvgFrameRate} {
		if r[0] <= 0 {
			continue
		}
		if math.Abs(float64(r[1])/float64(r[0])-1/fps) <= tol {
			return "", true
		}
		known = append(known, fmt.Sprintf("%s %d/%d", [2]string{"r_frame_rate", "avg_frame_rate"}[i], r[0], r[1]))
	}
	return strings.Join(known, ", "), len(known) == 0
}

// CountPackets demuxes the whole of a video file's first video stream
// without decoding it (ffprobe -count_packets) and returns how many
// packets (frames) it could read, and what ffprobe reported as wrong on
// the way ("" when nothing): a file cut short (a faststart file whose
// header still lists every frame) holds fewer packets than it states, or
// a partial last one.
func (d *FFmpeg) CountPackets(ctx context.Context, path string) (n int64, problems string, err error) {
	if d.Probe == "" {
		return 0, "", errNoProbe
	}
	cmd := probeCommand(ctx, d.Probe, "-v", "error", "-select_streams", "v:0", "-count_packets",
		"-show_entries", "stream=nb_read_packets", "-of", "json", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return 0, "", fmt.Errorf("ffprobe -count_packets: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r struct {
		Streams []struct {
			N string `json:"nb_read_packets"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Streams) != 1 {
		return 0, "", fmt.Errorf("ffprobe -count_packets: unexpected report %.200q", out)
	}
	n, err = strconv.ParseInt(r.Streams[0].N, 10, 64)
	if err != nil || n < 0 {
		return 0, "", fmt.Errorf("ffprobe -count_packets: nb_read_packets %q", r.Streams[0].N)
	}
	problems = strings.TrimSpace(stderr.String())
	if len(problems) > 500 {
		problems = problems[:500] + "…"
	}
	return n, problems, nil
}

// NeedsFor returns what the episodes index (spans) needs of each video
// file of the dataset's cameras (CheckStream), at info.json's frame sizes:
// the checks stream runs on each file before using it, for lrstream
// validate.
func NeedsFor(info *schema.Info, spans []shard.VideoSpan) map[string]FileNeeds {
	var cams []Camera
	for _, k := range Keys(info) {
		f, _ := info.Feature(k)
		c, h, w, err := FeatureShape(f)
		if err != nil {
			continue
		}
		cams = append(cams, Camera{Key: k, C: c, H: h, W: w})
	}
	return fileNeeds(info, cams, spans, false)
}
