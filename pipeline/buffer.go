package pipeline

import (
	"log/slog"
	"unsafe"

	"github.com/lrstream/lrstream/order"
	"github.com/lrstream/lrstream/video"
)

// DefaultBufferBytes is the default memory budget of the shuffle buffer
// (TrainOptions.BufferBytes): 1 GiB. Language-only streams never reach it
// (16,384 frames of a 14-dim state and action take about 10 MB); two
// 480×640 cameras (1.8 MB a sample) get 582 frames.
const DefaultBufferBytes = 1 << 30

// DefaultCameraMemory is what a training stream with camera frames is
// sized to by default (TrainOptions.BufferBytes 0): its shuffle buffer's
// budget is what this leaves beside the rest of its estimate (TrainBytes:
// the pieces being decoded, the decoder's buffers, the piece being fed,
// the batch being collated) and TrainRestBytes, so that one consumer of
// two 480×640 cameras stays under 1.5 GB (docs/training.md, "Camera
// frames: the bound").
const DefaultCameraMemory = 1400 << 20

// TrainRestBytes is what a training stream's process holds besides its
// estimate (TrainBytes): parsed footers, encoding, the batch being
// written. Commands set their soft memory limit this far above it.
const TrainRestBytes = 224 << 20

// minCameraBudget is the least default buffer budget of a camera stream,
// when its decoding alone (many workers) leaves less of
// DefaultCameraMemory.
const minCameraBudget = 128 << 20

// bufferBudget is to's shuffle buffer budget in bytes (negative: none):
// to.BufferBytes when set, else DefaultBufferBytes, or for a stream with
// camera frames what DefaultCameraMemory leaves (cameraBudget).
func bufferBudget(srcs []Mix, to TrainOptions) int64 {
	if to.BufferBytes != 0 {
		return to.BufferBytes
	}
	for _, m := range srcs {
		if CameraBytesPerSample(m.Config) > 0 {
			return cameraBudget(srcs, to)
		}
	}
	return DefaultBufferBytes
}

// cameraBudget is the default buffer budget of a camera stream:
// DefaultCameraMemory less TrainRestBytes and the stream's estimate
// without a buffer (its pieces sized as at DefaultBufferBytes: a smaller
// budget only makes them smaller), at least minCameraBudget. From
// metadata and options only, so every consumer gets the same order.
func cameraBudget(srcs []Mix, to TrainOptions) int64 {
	to.BufferBytes, to.Shuffle, to.Order = DefaultBufferBytes, false, OrderGlobal
	to.Consumers = 1
	return max(minCameraBudget, DefaultCameraMemory-TrainRestBytes-TrainBytes(srcs, to))
}

// heldFrameOverhead is the memory of a held frame besides its feature
// bytes: its record (heldFrame) and its cell in the serve ring, with
// slack for the chunk arrays' growth. Rendered samples are shared between
// the frames of an episode state and not counted.
const heldFrameOverhead = int64(unsafe.Sizeof(heldFrame{})) + 8 + 24

// SampleBytes is the memory one frame held by the training order takes,
// from metadata only (so every consumer computes the same): its numeric
// features, camera and image frames (a --delta-timestamps window of k
// timestamps: k frames, with their pad mask), and a fixed overhead.
func SampleBytes(cfg *Config) int64 {
	n := heldFrameOverhead
	for _, f := range infoFeatures(cfg) {
		n += windowBytes(cfg, f.Name, int64(f.FrameBytes()))
	}
	return n + heldCameraBytes(cfg) + cameraPadBytes(cfg)
}

// windowLen is the timestamps of key's --delta-timestamps window (0
// without one).
func windowLen(cfg *Config, key string) int64 {
	for _, d := range cfg.Deltas {
		if d.Key == key {
			return int64(max(len(d.Seconds), len(d.Offsets)))
		}
	}
	return 0
}

// windowBytes is what feature key of size bytes a frame takes in a held
// sample: k frames and a k-byte pad mask with a window of k timestamps,
// else one frame.
func windowBytes(cfg *Config, key string, size int64) int64 {
	if k := windowLen(cfg, key); k > 0 {
		return k*size + k
	}
	return size
}

// sampleCameras are cfg's video cameras and image features.
func sampleCameras(cfg *Config) []video.Camera {
	var cams []video.Camera
	if cfg.Cameras != nil {
		cams = append(cams, cfg.Cameras.Cameras...)
	}
	if cfg.Images != nil {
		cams = append(cams, cfg.Images.Cameras...)
	}
	return cams
}

// heldCameraBytes is the batch bytes of one held sample's camera and
// image frames: CameraBytesPerSample, with k frames of a camera whose
// --delta-timestamps window has k timestamps (pad masks not counted).
func heldCameraBytes(cfg *Config) int64 {
	var n int64
	for _, c := range sampleCameras(cfg) {
		n += max(windowLen(cfg, c.Key), 1) * int64(c.FrameBytes())
	}
	return n
}

// cameraPadBytes is the bytes of the cameras' window pad masks of one
// sample (one a timestamp).
func cameraPadBytes(cfg *Config) int64 {
	var n int64
	for _, c := range sampleCameras(cfg) {
		n += windowLen(cfg, c.Key)
	}
	return n
}

// spilledRecordBytes is what a held frame whose features wait in the
// spill file keeps in memory besides heldFrameOverhead: its array's
// slice header (nil until read back), its slot's offset and size.
const spilledRecordBytes = 24 + 8 + 4

// SpilledSampleBytes is the memory one frame held by the training order
// takes when its camera frames wait in a spill file (TrainOptions.Spill):
// SampleBytes less the camera frames (a window's frames included), plus
// the slot's record and the cameras' conversions (their numeric features
// and pad masks are counted although they are spilled with the cameras).
// From metadata only. Without camera frames, or with samples smaller
// than perFrameStride (held in their chunk's array, never spilled), it is
// SampleBytes.
func SpilledSampleBytes(cfg *Config) int64 {
	n, cam := SampleBytes(cfg), heldCameraBytes(cfg)
	if cam == 0 || n-heldFrameOverhead < perFrameStride {
		return n
	}
	return n - cam + spilledRecordBytes + 16*int64(len(sampleCameras(cfg)))
}

// waitingSampleBytes is the memory of a frame waiting in the shuffle buffer
// with to: SpilledSampleBytes with a spill directory, else SampleBytes.
// With to.oneFramePerWindow it is what builds before camera windows
// were counted in full computed (legacyWindowBytes).
func waitingSampleBytes(cfg *Config, to TrainOptions) int64 {
	n := SampleBytes(cfg)
	if to.Spill != "" {
		n = SpilledSampleBytes(cfg)
	}
	if to.oneFramePerWindow {
		n -= legacyWindowBytes(cfg, to.Spill != "")
	}
	return n
}

// legacyWindowBytes is what waitingSampleBytes counts for cfg's camera
// windows beyond what builds before it did (one frame per camera, no pad
// mask): the windows' other frames and pad masks, or with a spill that
// holds the cameras on disk, their pad masks. For explainResume.
func legacyWindowBytes(cfg *Config, spill bool) int64 {
	if spill && SpilledSampleBytes(cfg) < SampleBytes(cfg) {
		return cameraPadBytes(cfg)
	}
	return heldCameraBytes(cfg) - CameraBytesPerSample(cfg) + cameraPadBytes(cfg)
}

// bufferFrames is the shuffle buffer in frames: to.BufferSize, lowered so
// that the buffer's frames take at most to.BufferBytes at the largest
// memory a held frame takes of srcs (waitingSampleBytes: with to.Spill
// without its camera frames; never below one frame). It depends on
// metadata and options only, so every consumer of a run gets the same
// order.
func bufferFrames(srcs []Mix, to TrainOptions) (frames int, sample int64) {
	for _, m := range srcs {
		sample = max(sample, waitingSampleBytes(m.Config, to))
	}
	frames = to.BufferSize
	if budget := to.BufferBytes; budget > 0 && int64(frames)*sample > budget {
		frames = int(max(1, budget/sample))
	}
	return frames, sample
}

// selectedMean returns the frames and episodes of cfg's selection, from
// the episodes index.
func selectedMean(cfg *Config) (frames, episodes int64) {
	for _, e := range cfg.Dataset.Episodes {
		if cfg.Selection.Contains(e.Index) {
			frames += e.Length
			episodes++
		}
	}
	return frames, episodes
}

// partitionOpen is the default PartitionOpen: defaultOpen(to.Order),
// lowered (to 1 at least) so that what all partitions read at once, P ×
// the episodes read at a time × the mean episode, plus the buffer (the
// partitioned order), fits the byte budget. All consumers together hold
// that; each holds 1/C of it. Metadata only, so it is the same for every
// consumer.
func partitionOpen(cfg *Config, to TrainOptions, sample int64) int {
	frames, eps := selectedMean(cfg)
	def := defaultOpen(to.Order)
	if to.BufferBytes <= 0 || eps == 0 {
		return def
	}
	mean := max(frames/eps, 1)
	left := to.BufferBytes / sample
	if to.Order != OrderStratified {
		left -= int64(to.BufferSize)
	} else if rows := cameraHeld([]Mix{{Config: cfg, Weight: 1}}, to).rows; rows > 0 {
		// The stratified order reads an open episode a piece at a time.
		mean = min(mean, rows)
	}
	open := left / (int64(max(to.Partitions, 1)) * mean)
	if to.Order == OrderStratified {
		// A wave of the stratified order has fewer than 2 × open
		// episodes.
		open = (open + 1) / 2
	}
	return int(min(max(open, 1), int64(def)))
}

// defaultOpen is PartitionOpen's default of the order named name.
func defaultOpen(name string) int {
	if name == OrderStratified {
		return DefaultStratifiedOpen
	}
	return DefaultPartitionOpen
}

// openEpisodes is the most episodes a partition of to's order reads at
// once: PartitionOpen, or fewer than twice as many (a wave) in the
// stratified order.
func openEpisodes(to TrainOptions) int64 {
	open := int64(max(to.PartitionOpen, 1))
	if to.Order == OrderStratified {
		return 2*open - 1
	}
	return open
}

// logBuffer states the shuffle buffer's memory when the byte budget
// lowered it, and warns when a partition of the partitioned orders holds
// fewer than minEpisodesPerPartition episodes (its batches cannot mix
// more) or their episodes being read at once (open per partition of the
// consumer) exceed the budget.
// The lowered buffer is worth a warning only when it is smaller than
// the selection it shuffles (a buffer lowered to 2,000 frames of a
// 1,175-frame dataset still holds all of it).
func logBuffer(srcs []Mix, to TrainOptions, asked, frames int, sample int64) {
	log := to.Log
	if log == nil {
		log = slog.Default()
	}
	var selected int64
	for _, m := range srcs {
		n, _ := selectedMean(m.Config)
		selected += n
	}
	if frames < asked && int64(frames) < selected {
		msg := "shuffle buffer lowered to its byte budget (--shuffle-buffer-bytes)"
		if to.Spill == "" && cameraHeld(srcs, to).rows > 0 {
			msg += "; --shuffle-spill DIR keeps the waiting camera frames on disk and the whole buffer (docs/training.md)"
		}
		log.Warn(msg, "frames", frames, "asked_frames", asked, "bytes_per_sample", sample,
			"buffer_bytes", int64(frames)*sample, "budget_bytes", to.BufferBytes)
	}
	if order.UsesPartitions(to.Order) && to.Partitions > 0 {
		if _, eps := selectedMean(srcs[0].Config); eps < minEpisodesPerPartition*int64(to.Partitions) {
			log.Warn("a batch of the partitioned orders comes from one partition: it mixes at most the partition's episodes (its whole ones and the parts of the two its edges split); 20 or more need --partitions at most episodes / 20, or --order global (docs/training.md, \"Which order, and shuffle quality\")",
				"episodes", eps, "partitions", to.Partitions, "episodes_per_partition", float64(eps)/float64(to.Partitions))
		}
	}
	if order.UsesPartitions(to.Order) && to.Partitions > 0 && to.Consumers > 0 && to.BufferBytes > 0 {
		all, eps := selectedMean(srcs[0].Config)
		if eps == 0 {
			return
		}
		per := int64(to.Partitions / to.Consumers)
		held := all / eps // frames held of an open episode
		if rows := cameraHeld(srcs, to).rows; rows > 0 {
			held = min(held, rows) // read a piece at a time
		}
		if reading := per * openEpisodes(to) * held * sample; reading > to.BufferBytes {
			log.Warn("the partitioned order reads its partitions' episodes at once: a consumer holds about reading_bytes of decoded frames besides its buffer (more consumers, fewer partitions, --resize or a lower --shuffle-buffer-bytes lower it)",
				"partitions_per_consumer", per, "episodes_per_partition", openEpisodes(to), "frames_per_episode", held,
				"bytes_per_sample", sample, "reading_bytes", reading)
		}
	}
}

// minEpisodesPerPartition is the fewest episodes a partition holds for
// the stratified order to mix 20 episodes a batch of 32 (TestShuffleQuality):
// below it logBuffer warns.
const minEpisodesPerPartition = 20

// HeldBytes estimates the memory of the frames a training stream of srcs
// with to holds decoded at once (Stats.HeldPeak × SampleBytes): its share
// of the shuffle buffer plus the episodes being read (one without
// shuffling or in the global order; PartitionOpen per partition of the
// consumer in the partitioned order). Commands use it to size the
// process's memory limit.
func HeldBytes(srcs []Mix, to TrainOptions) int64 {
	if len(srcs) == 0 {
		return 0
	}
	z, _ := completeTrain(srcs, to)
	return countHeld(srcs, z.to, z.sample, cameraHeld(srcs, z.to)).bytes()
}

// sizedTrain is a stream's options completed by completeTrain.
type sizedTrain struct {
	to TrainOptions
	// mem is to sized by the byte budget alone, before the spill's disk
	// budget lowered it (the warnings compare the two).
	mem TrainOptions
	// sample is the memory a frame waiting in the buffer takes.
	sample int64
}

// completeTrain fills in to's defaults for a stream of srcs (consumers,
// buffer, partitions, byte budget) and sizes its buffer (sizeBuffer,
// shuffling only). The error is a spill budget no buffer fits
// (spillSize).
func completeTrain(srcs []Mix, to TrainOptions) (sizedTrain, error) {
	srcs = unmeasured(srcs) // the order comes from metadata alone
	to.Consumers = max(to.Consumers, 1)
	if to.BufferSize <= 0 {
		to.BufferSize = DefaultBufferSize
	}
	parts := order.UsesPartitions(to.Order)
	if parts && to.Partitions <= 0 {
		to.Partitions = DefaultPartitions
	}
	to.BufferBytes = bufferBudget(srcs, to)
	var z sizedTrain
	var err error
	if to.Shuffle {
		z, err = sizeBuffer(srcs, to)
	} else {
		_, z.sample = bufferFrames(srcs, to)
		z.to, z.mem = to, to
	}
	if parts && z.to.PartitionOpen <= 0 {
		z.to.PartitionOpen = defaultOpen(to.Order)
	}
	return z, err
}

// sizeBuffer sizes the shuffle buffer of a shuffled stream of srcs with
// to (its defaults filled in): BufferSize lowered to the byte budget
// (bufferFrames), the partitioned orders' PartitionOpen (partitionOpen),
// then both lowered to the spill's disk budget (spillSize). From metadata
// and options only, so every consumer gets the same order.
func sizeBuffer(srcs []Mix, to TrainOptions) (sizedTrain, error) {
	var z sizedTrain
	z.mem, z.sample = memorySize(srcs, to)
	var err error
	z.to, err = spillSize(srcs, z.mem, z.sample)
	return z, err
}

// memorySize is sizeBuffer without the spill's disk budget.
func memorySize(srcs []Mix, to TrainOptions) (TrainOptions, int64) {
	frames, sample := bufferFrames(srcs, to)
	to.BufferSize = frames
	if order.UsesPartitions(to.Order) && to.PartitionOpen <= 0 {
		to.PartitionOpen = partitionOpen(srcs[0].Config, to, sample)
	}
	return to, sample
}

// heldCount is what a training stream holds, in frames: waiting, the
// frames waiting in its buffer share and open episodes (sample bytes in
// memory each), and moving, those being decoded ahead, fed and collated
// (held bytes each, HeldSampleBytes: in the form they are held in), of
// which free are the served frames' arrays kept for reuse rather than
// frames (full bytes each: the holder bounds them in batch bytes); and
// its camera pieces (cams).
type heldCount struct {
	waiting, moving, free int64
	sample, held, full    int64
	cams                  camHeld
}

// bytes is the memory of what h counts.
func (h heldCount) bytes() int64 {
	return h.waiting*h.sample + (h.moving-h.free)*h.held + h.free*h.full + h.cams.flight
}

// countHeld counts what a stream of srcs with to (completed:
// completeTrain) holds with pieces cams; sample is what a waiting frame
// takes.
func countHeld(srcs []Mix, to TrainOptions, sample int64, cams camHeld) heldCount {
	C := int64(max(to.Consumers, 1))
	frames := to.BufferSize
	if !to.Shuffle {
		frames = 0
	}
	h := heldCount{sample: sample, cams: cams}
	// sample is what a frame waiting in the buffer takes in memory, held
	// what a frame being decoded, fed or collated takes (they differ
	// with a spill directory), full its batch bytes.
	var longest int64
	for _, m := range srcs {
		h.full = max(h.full, SampleBytes(m.Config))
		h.held = max(h.held, HeldSampleBytes(m.Config))
		for _, e := range m.Config.Dataset.Episodes {
			longest = max(longest, e.Length)
		}
	}
	// The episode being read, and the frames of the batch being
	// collated (at most another episode's worth is a safe bound).
	h.waiting, h.moving = int64(frames)/C, 2*longest
	rows := h.cams.rows
	if rows > 0 {
		// With cameras an episode is read a piece at a time: the piece
		// being fed to the order, the batch being collated, a piece
		// decoded ahead of its first use (hoistPieces) and the served
		// frames' arrays kept for reuse (maxFreeFrames).
		h.moving, h.free = 3*rows+maxFreeFrames, maxFreeFrames
	}
	if order.UsesPartitions(to.Order) {
		h.waiting = partitionWaiting(srcs[0].Config, to, frames, rows)
		if rows > 0 {
			h.moving = 3*rows + maxFreeFrames
		}
	}
	if spillsAhead(srcs, to) {
		// Pieces are decoded up to spillAhead serve indices before their
		// first use (hoistPieces): about that many frames more wait, and
		// a piece.
		h.waiting += int64(spillAhead(frames, to.Consumers)) + rows
	}
	return h
}

// partitionWaiting is what a consumer of the partitioned orders holds
// waiting: its partitions' buffer shares (none in the stratified order)
// and open episodes, read a piece of rows samples at a time with cameras
// (rows > 0).
func partitionWaiting(cfg *Config, to TrainOptions, frames int, rows int64) int64 {
	P := int64(max(to.Partitions, 1))
	open := openEpisodes(to)
	share := (int64(frames) + P - 1) / P // the partition's buffer share
	if to.Order == OrderStratified {
		share = 0 // no buffer
	}
	if !to.Shuffle {
		open = 1
	}
	all, eps := selectedMean(cfg)
	mean := int64(0)
	if eps > 0 {
		mean = all / eps
	}
	if rows > 0 {
		mean = min(mean, rows) // an open episode is read a piece at a time
	}
	return (P / int64(max(to.Consumers, 1))) * (share + open*mean)
}

// spillAhead is how many serve indices before its first use a piece of
// a shuffled stream with a spill is decoded (holder.ahead,
// hoistPieces): the consumer's share of the buffer of frames frames, at
// least 1. Waiting frames cost disk then, and decoding an episode's
// pieces one after the other lets its FFmpeg process continue instead
// of starting one per piece.
func spillAhead(frames, consumers int) int {
	return max(frames/max(consumers, 1), 1)
}

// spillsAhead reports whether a stream of srcs with to decodes pieces
// ahead (spillAhead): shuffled, with a spill directory, and samples that
// spill (SpilledSampleBytes below SampleBytes).
func spillsAhead(srcs []Mix, to TrainOptions) bool {
	if to.Spill == "" || !to.Shuffle {
		return false
	}
	for _, m := range srcs {
		if SpilledSampleBytes(m.Config) < SampleBytes(m.Config) {
			return true
		}
	}
	return false
}

// trainPieceBytes is the piece size (Config.PieceBytes) of a training
// stream with cameras: at most a sixteenth of the shuffle buffer's byte
// budget (64 MiB at the default 1 GiB), so that the pieces being decoded
// (the decoding window: workers + 1) and the decoder's recycled buffers
// stay small beside the buffer. With a spill directory the buffer's
// camera frames are on disk: the pieces get what DefaultCameraMemory
// leaves (spillPieceBytes) instead, as large pieces mean fewer FFmpeg
// processes and seeks. Output never depends on it.
func trainPieceBytes(cfg *Config, budget int64, spill bool) int64 {
	pb := cfg.PieceBytes
	if pb <= 0 {
		pb = DefaultPieceBytes
	}
	if spill {
		return spillPieceBytes(cfg, pb)
	}
	if budget > 0 {
		pb = min(pb, max(budget/16, 1<<20))
	}
	return pb
}

// spillPieceBytes is the piece size of a camera stream whose buffer
// spills: pb, halved (to 1 MiB at least) until the frames being decoded
// (camFlight: the pieces' buffers, in batch bytes), fed and collated (3
// pieces' samples in the form they are held in, HeldSampleBytes) and the
// maxFreeFrames arrays kept for reuse (in batch bytes) fit
// DefaultCameraMemory less TrainRestBytes. From metadata and the held
// form MeasureHeldFrames found (the batch form without it); output never
// depends on it.
func spillPieceBytes(cfg *Config, pb int64) int64 {
	return spillPieceBytesHeld(cfg, pb, HeldSampleBytes(cfg))
}

// spillPieceBytesHeld is spillPieceBytes with samples held in held bytes
// each.
func spillPieceBytesHeld(cfg *Config, pb, held int64) int64 {
	full := SampleBytes(cfg)
	for ; pb > 1<<20; pb /= 2 {
		rows, flight := camFlight(cfg, pb)
		if flight+3*rows*held+maxFreeFrames*full <= DefaultCameraMemory-TrainRestBytes {
			break
		}
	}
	return max(pb, 1<<20)
}

// camFlight is cameraHeld's rows and flight of one camera stream cfg
// with pieces of pb bytes.
func camFlight(cfg *Config, pb int64) (rows, flight int64) {
	c := *cfg
	c.PieceBytes = pb
	rows = int64(pieceRows(&c))
	before, after := cameraHalo(&c)
	rows += int64(before + after)
	w := int64(workerCount(&c))
	var widest int64 // one camera's frame
	if c.Cameras != nil {
		for _, cam := range c.Cameras.Cameras {
			widest = max(widest, int64(cam.FrameBytes()))
		}
	}
	return rows, (w+1)*rows*CameraBytesPerSample(cfg) + 8*rows*widest
}

// camHeld is what a training stream's camera frames cost besides its held
// frames: rows, the samples of a piece (0 without cameras), and flight,
// the bytes of the pieces being decoded (the decoding window, workers + 1
// pieces) and of the decoder's recycled piece buffers (at most
// video.Set's 8, one camera's piece each).
type camHeld struct {
	rows, flight int64
}

func cameraHeld(srcs []Mix, to TrainOptions) camHeld {
	var h camHeld
	budget := to.BufferBytes
	if budget == 0 {
		budget = bufferBudget(srcs, to)
	}
	for _, m := range srcs {
		per := CameraBytesPerSample(m.Config)
		if per == 0 {
			continue
		}
		rows, flight := camFlight(m.Config, trainPieceBytes(m.Config, budget, to.Spill != ""))
		h.rows = max(h.rows, rows)
		h.flight = max(h.flight, flight)
	}
	return h
}

// PlainBytes estimates what a plain pass (no training iteration) of srcs
// holds of camera frames: the pieces being decoded (workers + 1, of
// Config.PieceBytes), the decoder's recycled piece buffers, and the
// pieces being collated (0 without cameras). serve counts it in a plain
// client's estimate, so that its soft memory limit covers camera streams.
func PlainBytes(srcs []Mix) int64 {
	var n int64
	for _, m := range srcs {
		per := CameraBytesPerSample(m.Config)
		if per == 0 {
			continue
		}
		h := cameraHeld([]Mix{m}, TrainOptions{BufferBytes: -1})
		n = max(n, h.flight+2*h.rows*per)
	}
	return n
}

// indexBytesPerFrame is what a training stream holds for each frame it
// indexes, besides held frames: the keep flag (1 byte), the epoch order
// (4), the serve index of each position (4) and an order being built (4).
const indexBytesPerFrame = 13

// TrainBytes estimates the memory of a training stream of srcs with to:
// the frames it holds (HeldBytes) plus its keep index and orders,
// indexBytesPerFrame for each frame it indexes — the whole selection in
// the global order, its partitions' share (1/C of the frames) in the
// partitioned one. Commands size their memory limits with it (lrstream
// stream's soft limit, serve's budget per client); it leaves out what a
// process shares between streams (parsed footers, decoding buffers).
func TrainBytes(srcs []Mix, to TrainOptions) int64 {
	var frames int64
	for _, m := range srcs {
		f, _ := selectedMean(m.Config)
		frames += f
	}
	if order.UsesPartitions(to.Order) {
		frames /= int64(max(to.Consumers, 1))
	}
	return HeldBytes(srcs, to) + frames*indexBytesPerFrame
}
