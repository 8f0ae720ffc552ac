package pipeline

import (
	"context"
	"slices"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/video"
)

// A training stream holds each video camera frame in the form its decoder
// gave it (Config.StoredFrames): YUV 4:2:0 planes (1.5 bytes a pixel),
// RGB24 rows when FFmpeg converts (--resize, a pixel format or colorspace
// lrstream does not convert itself: the batch's 3 bytes a pixel), 12-bit
// depth codes (2 bytes a pixel of the file's size). Which one is only
// known once the decoder has probed and checked a file, so the estimates
// count the batch form (SampleBytes, an upper bound) unless
// MeasureHeldFrames has asked the decoder.

// MeasureHeldFrames records, for each dataset of srcs with video cameras,
// the bytes a training stream holds one frame of each camera in: what
// the decoder's own video.Set.FillStored keeps of the first frame of the
// first selected episode (the conversion's source bytes, or the batch
// bytes when it converts at once). The piece estimates then count held
// frames in that form (spillPieceBytes, HeldBytes: larger pieces fit the
// same memory), never the buffer's size or the order, which come from
// metadata alone. It decodes one frame a camera (an FFmpeg start, or the
// frame cache), so commands call it for streams whose pieces it sizes
// (--shuffle-spill) before their estimates, and before streams share the
// configs. A camera whose frame cannot be decoded stays counted in its
// batch form; only ctx's end is an error.
func MeasureHeldFrames(ctx context.Context, srcs []Mix) error {
	for _, m := range srcs {
		cfg := m.Config
		set, ep, ok := firstVideoEpisode(cfg)
		if !ok || cfg.heldFrames != nil {
			continue
		}
		held, err := measureSet(ctx, set, ep)
		if err != nil {
			return err
		}
		cfg.heldFrames = held
	}
	return nil
}

// firstVideoEpisode returns cfg's video cameras and its first selected
// episode (ok false without either).
func firstVideoEpisode(cfg *Config) (*video.Set, schema.Episode, bool) {
	set := cfg.Cameras
	if set == nil || len(set.Cameras) == 0 {
		return nil, schema.Episode{}, false
	}
	for _, e := range cfg.Dataset.Episodes {
		if cfg.Selection.Contains(e.Index) && e.Length > 0 {
			return set, e, true
		}
	}
	return nil, schema.Episode{}, false
}

// measureSet is the held bytes of a frame of each of set's cameras (0:
// unknown), from episode ep's first frame, within one run of the set
// (Start, Release).
func measureSet(ctx context.Context, set *video.Set, ep schema.Episode) ([]int64, error) {
	set.Start(ctx)
	defer set.Release()
	held := make([]int64, len(set.Cameras))
	for k, cam := range set.Cameras {
		dst := make([]byte, cam.FrameBytes())
		convs := make([]*video.FrameConv, 1)
		var failed bool
		err := set.FillStored(ctx, k, []int64{ep.Index}, []int64{ep.FromIndex}, []float32{0}, dst, convs,
			func(int, error) { failed = true }, nil)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		switch {
		case err != nil || failed:
			// Unknown: counted in the batch form.
		case convs[0] == nil:
			held[k] = int64(cam.FrameBytes()) // converted at once
		default:
			src, _ := convs[0].Sizes()
			held[k] = int64(src)
		}
	}
	return held, nil
}

// heldFrameBytes is what camera k of cfg's video cameras takes in a held
// sample: the form MeasureHeldFrames found, else (or with a
// --delta-timestamps window, whose frames are converted as they are
// gathered) its batch bytes, k frames of a window.
func heldFrameBytes(cfg *Config, k int) int64 {
	cam := cfg.Cameras.Cameras[k]
	if w := windowLen(cfg, cam.Key); w > 0 {
		return w * int64(cam.FrameBytes())
	}
	if k < len(cfg.heldFrames) && cfg.heldFrames[k] > 0 {
		return cfg.heldFrames[k]
	}
	return int64(cam.FrameBytes())
}

// HeldSampleBytes is the memory one frame takes while a training stream
// holds it in memory (the frames being fed and collated): SampleBytes with
// each video camera's frames in the form they are held in
// (heldFrameBytes: as MeasureHeldFrames found it; the batch form when not
// measured).
func HeldSampleBytes(cfg *Config) int64 {
	n := SampleBytes(cfg)
	if cfg.Cameras == nil {
		return n
	}
	for k, cam := range cfg.Cameras.Cameras {
		n += heldFrameBytes(cfg, k) - max(windowLen(cfg, cam.Key), 1)*int64(cam.FrameBytes())
	}
	return n
}

// unmeasured returns srcs with their configs' held-frame measurements
// dropped (copies): what the order depends on — the buffer's budget and
// the spill's — is sized from metadata alone.
func unmeasured(srcs []Mix) []Mix {
	out, copied := srcs, false
	for i, m := range srcs {
		if m.Config.heldFrames == nil {
			continue
		}
		if !copied {
			out, copied = slices.Clone(srcs), true
		}
		c := *m.Config
		c.heldFrames = nil
		out[i].Config = &c
	}
	return out
}

// cameraHeldMost is cameraHeld with the most samples a piece of srcs may
// have whatever form its frames are held in: with a spill directory, the
// pieces spillPieceBytes would choose were held frames free (the pieces'
// own buffers are in batch bytes whatever the form); without one the
// pieces do not depend on the form. For the spill's worst case, which
// must not depend on a measurement.
func cameraHeldMost(srcs []Mix, to TrainOptions) camHeld {
	h := cameraHeld(srcs, to)
	if to.Spill == "" {
		return h
	}
	for _, m := range srcs {
		if CameraBytesPerSample(m.Config) == 0 {
			continue
		}
		pb := m.Config.PieceBytes
		if pb <= 0 {
			pb = DefaultPieceBytes
		}
		rows, flight := camFlight(m.Config, spillPieceBytesHeld(m.Config, pb, 0))
		h.rows, h.flight = max(h.rows, rows), max(h.flight, flight)
	}
	return h
}
