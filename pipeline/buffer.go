package pipeline

import (
	"log/slog"
	"unsafe"
)

// DefaultBufferBytes is the default memory budget of the shuffle buffer
// (TrainOptions.BufferBytes): 1 GiB. Language-only streams never reach it
// (16,384 frames of a 14-dim state and action take about 10 MB); two
// 480×640 cameras (1.8 MB a sample) get 582 frames.
const DefaultBufferBytes = 1 << 30

// heldFrameOverhead is the memory of a held frame besides its feature
// bytes: the frame's fixed fields, slice headers and list entries.
// Rendered samples are shared between the frames of an episode state and
// not counted.
const heldFrameOverhead = int64(unsafe.Sizeof(heldFrame{})) + 64

// SampleBytes is the memory one frame held by the training order takes,
// from metadata only (so every consumer computes the same): its numeric
// features (delta-timestamps windows included, with their pad masks), its
// camera and image frames, and a fixed overhead.
func SampleBytes(cfg *Config) int64 {
	n := heldFrameOverhead + 5*24 // the core columns' slices
	for _, f := range infoFeatures(cfg) {
		size := int64(f.FrameBytes())
		k := int64(1)
		for _, d := range cfg.Deltas {
			if d.Key == f.Name {
				k = int64(max(len(d.Seconds), len(d.Offsets)))
				n += k // the pad mask
			}
		}
		n += k*size + 24
	}
	return n + CameraBytesPerSample(cfg)
}

// bufferFrames is the shuffle buffer in frames: to.BufferSize, lowered so
// that the buffer's frames take at most to.BufferBytes at the largest
// SampleBytes of srcs (never below one frame). It depends on metadata and
// options only, so every consumer of a run gets the same order.
func bufferFrames(srcs []Mix, to TrainOptions) (frames int, sample int64) {
	for _, m := range srcs {
		sample = max(sample, SampleBytes(m.Config))
	}
	frames = to.BufferSize
	if budget := to.BufferBytes; budget > 0 && int64(frames)*sample > budget {
		frames = int(max(1, budget/sample))
	}
	return frames, sample
}

// logBuffer states the shuffle buffer's memory when the byte budget
// lowered it, and warns when the partitioned order's episodes being read
// at once (one per partition of the consumer) exceed the budget.
func logBuffer(srcs []Mix, to TrainOptions, asked, frames int, sample int64) {
	if !to.Shuffle {
		return
	}
	if frames < asked {
		slog.Warn("shuffle buffer lowered to its byte budget (--shuffle-buffer-bytes)",
			"frames", frames, "asked_frames", asked, "bytes_per_sample", sample,
			"buffer_bytes", int64(frames)*sample, "budget_bytes", to.BufferBytes)
	}
	if to.Order == OrderPartitioned && to.Partitions > 0 && to.Consumers > 0 && to.BufferBytes > 0 {
		cfg := srcs[0].Config
		var frames, eps int64
		for _, e := range cfg.Dataset.Episodes {
			if cfg.Selection.Contains(e.Index) {
				frames += e.Length
				eps++
			}
		}
		if eps == 0 {
			return
		}
		per := int64(to.Partitions / to.Consumers)
		if reading := per * (frames / eps) * sample; reading > to.BufferBytes {
			slog.Warn("the partitioned order reads one episode per partition at a time: a consumer holds about reading_bytes of decoded frames besides its buffer (fewer partitions per consumer, or --resize, lower it)",
				"partitions_per_consumer", per, "mean_episode_frames", frames/eps, "bytes_per_sample", sample, "reading_bytes", reading)
		}
	}
}
