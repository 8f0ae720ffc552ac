package video

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
)

// Camera is one decoded camera: a video feature and the (C, H, W) shape
// of its frames in the batches.
type Camera struct {
	Key     string
	C, H, W int
	// Depth, for a depth camera (C = 1), dequantizes its 12-bit codes to
	// float32 in DepthUnit; nil for an RGB camera (uint8).
	Depth     *DepthTable
	DepthUnit string
	depth     *DepthParams
	img       *imageDepth // a depth image feature (TIFF values, no table)
}

// isDepth reports whether c is a depth camera (video or image).
func (c Camera) isDepth() bool { return c.Depth != nil || c.img != nil }

// FrameBytes is the size of one frame in the batch.
func (c Camera) FrameBytes() int { return c.C * c.H * c.W * c.ItemSize() }

// CacheBytes estimates the bytes one frame of the camera takes in the frame
// cache uncompressed: YUV 4:2:0 planes (RGB24 when FFmpeg converts is
// twice that), 16-bit gray for depth.
func (c Camera) CacheBytes() int64 {
	if c.isDepth() {
		return int64(2 * c.W * c.H)
	}
	return int64(yuvSize(c.W, c.H))
}

// ItemSize is the size of one value of the camera's frames: 4 (float32)
// for depth, 1 (uint8) for RGB.
func (c Camera) ItemSize() int {
	if c.isDepth() {
		return 4
	}
	return 1
}

// DType is the numpy dtype of the camera's frames in the batches.
func (c Camera) DType() string {
	if c.isDepth() {
		return "<f4"
	}
	return "|u1"
}

// Kind is "depth" or "rgb".
func (c Camera) Kind() string {
	if c.isDepth() {
		return KindDepth
	}
	return KindRGB
}

// Camera kinds (the header's cameras[].kind).
const (
	KindRGB   = "rgb"
	KindDepth = "depth"
)

// Keys returns the dataset's video features (its cameras) in info.json
// order.
func Keys(info *schema.Info) []string { return info.FeatureNames(schema.DTypeVideo) }

// ImageKeys returns the dataset's image features (encoded images in the
// data files) in info.json order.
func ImageKeys(info *schema.Info) []string { return info.FeatureNames(schema.DTypeImage) }

// visualKeys returns the video and image features in info.json order.
func visualKeys(info *schema.Info) []string {
	return info.FeatureNames(schema.DTypeVideo, schema.DTypeImage)
}

// FeatureShape returns the (C, H, W) of a video feature from its info.json
// shape and names (["height", "width", "channels"] as LeRobot writes it,
// or channels first).
func FeatureShape(f schema.Feature) (c, h, w int, err error) {
	if len(f.Shape) != 3 {
		return 0, 0, 0, fmt.Errorf("camera %s: shape %v, want 3 dimensions", f.Name, f.Shape)
	}
	var names []string
	_ = json.Unmarshal(f.Names, &names)
	if len(names) == 3 && names[0] == "channels" {
		return f.Shape[0], f.Shape[1], f.Shape[2], nil
	}
	if len(names) == 3 && names[2] == "channels" {
		return f.Shape[2], f.Shape[0], f.Shape[1], nil
	}
	if f.Shape[2] <= 4 {
		return f.Shape[2], f.Shape[0], f.Shape[1], nil
	}
	return f.Shape[0], f.Shape[1], f.Shape[2], nil
}

// Locator gives the local path of a dataset file for the decoder, and a
// release function to call when done with it.
type Locator func(ctx context.Context, name string) (path string, release func(), err error)

// Mode values of --cameras besides a list of keys.
const (
	ModeAuto = "auto"
	ModeAll  = "all"
	ModeNone = "none"
)

// Choice is the outcome of resolving --cameras against a dataset.
type Choice struct {
	// Available lists the dataset's cameras (video and image features);
	// Decoded those whose frames
	// the batches carry; Absent those left out because their video files
	// are absent (--cameras auto).
	Available, Decoded, Absent []string
}

// Resolve decides which cameras to decode. spec is "auto" (the default:
// every camera whose video files all exist; see autoCameras), "all"
// (every camera; absent files are an error when decoded), "none", or a
// comma-separated list of camera keys. spans gives the episodes' video
// locations; episodes the selected episodes (nil: all), which auto does
// not look at: it decides from every file of a camera, so that every
// consumer of a dataset (each worker, rank or node) decides the same.
func Resolve(spec string, info *schema.Info, spans []shard.VideoSpan, episodes []int64, exists func(name string) bool) (Choice, error) {
	ch := Choice{Available: visualKeys(info)}
	switch spec {
	case ModeNone:
		return ch, nil
	case ModeAll:
		ch.Decoded = append([]string(nil), ch.Available...)
		return ch, nil
	case "", ModeAuto:
		dec, absent, err := autoCameras(info, ch.Available, spans, exists)
		ch.Decoded, ch.Absent = dec, absent
		return ch, err
	}
	known := map[string]bool{}
	for _, k := range ch.Available {
		known[k] = true
	}
	seen := map[string]bool{}
	for _, k := range strings.Split(spec, ",") {
		k = strings.TrimSpace(k)
		if k == "" || seen[k] {
			continue
		}
		if !known[k] {
			return ch, fmt.Errorf("--cameras: %q is not a camera of the dataset (cameras: %s)", k, strings.Join(ch.Available, ", "))
		}
		seen[k] = true
		ch.Decoded = append(ch.Decoded, k)
	}
	return ch, nil
}

// autoCameras is --cameras auto: image features are decoded (they live
// in the data files); each video camera is decided from all its video
// files in the episodes index (every episode, selected or not):
//
//   - all present: decoded;
//   - none present (or the index locates none): left out (Absent), which
//     commands report with a warning (pipeline.CameraNote);
//   - some present: an error naming the camera and the absent files — a
//     partial copy (an interrupted download, a cache missing a blob, a
//     directory where a file should be, an index pointing at a file that
//     is not there) would otherwise train on a camera set that depends
//     on the copy.
func autoCameras(info *schema.Info, available []string, spans []shard.VideoSpan, exists func(string) bool) (decoded, absent []string, err error) {
	files := map[string][]string{} // camera → its files, index order, once each
	seen := map[string]bool{}
	for _, sp := range spans {
		name, err := info.VideoFile(sp.Key, sp.Chunk, sp.File)
		if err != nil {
			continue // its frames fail naming the template's error
		}
		if !seen[name] {
			seen[name] = true
			files[sp.Key] = append(files[sp.Key], name)
		}
	}
	for _, k := range available {
		if f, _ := info.Feature(k); f.DType == schema.DTypeImage {
			decoded = append(decoded, k)
			continue
		}
		var missing []string
		for _, name := range files[k] {
			if !exists(name) {
				missing = append(missing, name)
			}
		}
		switch n := len(files[k]); {
		case n == 0 || len(missing) == n:
			absent = append(absent, k)
		case len(missing) > 0:
			return nil, nil, partialCameraError(k, missing, n)
		default:
			decoded = append(decoded, k)
		}
	}
	return decoded, absent, nil
}

// partialCameraError is --cameras auto's error for a camera some of whose
// video files are absent.
func partialCameraError(key string, missing []string, total int) error {
	shown := missing
	if len(shown) > 5 {
		shown = shown[:5]
	}
	more := ""
	if len(missing) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(missing)-len(shown))
	}
	return fmt.Errorf("--cameras auto: camera %s: %d of its %d video files are absent (%s%s) while the others are present: "+
		"this copy of the dataset is incomplete, and the camera would be left out of every sample here while other copies decode it. "+
		"Fetch the absent files, or choose the cameras with --cameras KEY,… (without %s) or --cameras none",
		key, len(missing), total, strings.Join(shown, ", "), more, key)
}

// FileExists reports whether a file exists in src (for Resolve), listing
// each directory once (a Hub source lists without downloading).
func FileExists(ctx context.Context, src fetch.Source) func(string) bool {
	dirs := map[string]map[string]bool{}
	return func(name string) bool {
		dir := path.Dir(name)
		files, ok := dirs[dir]
		if !ok {
			files = map[string]bool{}
			names, err := src.List(ctx, dir)
			if err == nil {
				for _, n := range names {
					files[n] = true
					files[path.Join(dir, n)] = true
				}
			}
			dirs[dir] = files
		}
		return files[name]
	}
}

// Set decodes the frames of the chosen cameras for batches of samples.
// Its fields are not changed after construction; it is safe for
// concurrent use. A run calls Start when it begins and Release when it
// ends.
type Set struct {
	Decoder Decoder
	Info    *schema.Info
	Cameras []Camera
	// Tolerance is LeRobot's tolerance_s (default 1e-4).
	Tolerance float64
	Locate    Locator
	// Held, when set, gives the local path of a video file that Locate
	// has located and still keeps, with a reference released by the
	// function it returns; ok false for any other file (nothing is
	// fetched). Prestart uses only such files; nil: no prestarts.
	Held func(name string) (path string, release func(), ok bool)
	// Frames, when set, serves decoded frames from a node-local cache
	// and stores the frames decoded (docs/video.md, "Frame cache").
	Frames *Frames
	// ReleaseFiles, when set, releases the video files Locate keeps for
	// later segments (temporary copies are removed); Release calls it
	// when a run ends.
	ReleaseFiles func()
	spans        map[int64]map[string]shard.VideoSpan
	needs        map[string]FileNeeds // by video file (CheckStream)
	checksMu     sync.Mutex
	checks       map[string]*fileCheck // by video file: its CheckStream verdict
	resize       bool
	free         chan []byte // recycled frame buffers (Buffer, Recycle)
	prepared     sync.Once   // the first segment prepared the other cameras

	prepMu    sync.Mutex
	prepping  []preparation // under way, until Release
	prepFirst int64         // the episode Start prepares (if prepHas)
	prepHas   bool
}

// preparation is one background preparation of a Set: cancel stops it,
// done is closed when its goroutines have returned.
type preparation struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Preparer is a Decoder that can get ready for a video file before its
// first segment (FFmpeg: probe and check its pixel format). Prepare
// returns when it is ready or ctx is done; it is an optimisation, so
// errors are left to the segments.
type Preparer interface {
	Prepare(ctx context.Context, path string)
}

// PrepareFirst names the episode whose video files Start prepares (the
// pipeline's first selected episode).
func (s *Set) PrepareFirst(ep int64) {
	s.prepMu.Lock()
	s.prepFirst, s.prepHas = ep, true
	s.prepMu.Unlock()
}

// Start begins a run: the decoder, if it is a Preparer, gets ready in the
// background for the video files of the PrepareFirst episode's cameras,
// so that their first segments do not wait for it. Nothing is fetched
// before Start: a Set that only answers questions (which cameras, which
// files) costs no download.
func (s *Set) Start(ctx context.Context) {
	if s.Frames != nil {
		// With a frame cache, files are prepared when a segment is decoded
		// (a cached one needs neither its file nor FFmpeg); the decoder's
		// build, which keys the cache's entries, is found meanwhile. Unless
		// the cache holds nothing of the dataset: then the first episode's
		// files are prepared now too, as without a cache, not after the
		// decoder's build is known (an `ffmpeg -version` the first time).
		s.background(ctx, func(ctx context.Context) { s.Frames.decoderID(ctx, s.Decoder) })
		if !s.Frames.Cache.Empty(s.Frames.Group) {
			return
		}
	}
	s.prepMu.Lock()
	ep, ok := s.prepFirst, s.prepHas
	s.prepMu.Unlock()
	if ok {
		s.prepare(ctx, ep, "")
	}
}

// background runs fn in a goroutine that Release cancels and waits for.
func (s *Set) background(ctx context.Context, fn func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.prepMu.Lock()
	s.prepping = append(s.prepping, preparation{cancel: cancel, done: done})
	s.prepMu.Unlock()
	go func() {
		defer close(done)
		fn(ctx)
	}()
}

// Release ends a run: it stops the background preparations (Start's and
// the first segment's) and waits for them, then calls ReleaseFiles. No
// goroutine of the Set outlives it.
func (s *Set) Release() {
	s.prepMu.Lock()
	stop := s.prepping
	s.prepping = nil
	s.prepMu.Unlock()
	for _, p := range stop {
		p.cancel()
	}
	for _, p := range stop {
		<-p.done
	}
	if s.ReleaseFiles != nil {
		s.ReleaseFiles()
	}
}

// prepare has the decoder prepare episode ep's video files of the cameras
// other than skip, and checks them (checkFile), each in its own goroutine,
// until Release.
func (s *Set) prepare(ctx context.Context, ep int64, skip string) {
	p, ok := s.Decoder.(Preparer)
	if !ok || s.resize {
		return
	}
	var names []string
	for _, o := range s.Cameras {
		sp, ok := s.spans[ep][o.Key]
		if o.Key == skip || !ok {
			continue
		}
		name, err := s.Info.VideoFile(o.Key, sp.Chunk, sp.File)
		if err != nil {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.prepMu.Lock()
	s.prepping = append(s.prepping, preparation{cancel, done})
	s.prepMu.Unlock()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			path, release, err := s.Locate(ctx, name)
			if err != nil {
				return // its segments report it
			}
			p.Prepare(ctx, path)
			// The file's check too (once per file; its segments wait for
			// the verdict): the segments Prestart may start need it.
			_ = s.checkFile(ctx, name, path)
			release()
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
}

// Buffer returns a buffer of n bytes for Fill, recycled when one is free.
// A new buffer gets capacity max(n, capHint), so that buffers of pieces of
// different lengths can all be reused. Its content is arbitrary: Fill
// writes every byte.
func (s *Set) Buffer(n, capHint int) []byte {
	for {
		select {
		case b := <-s.free:
			if cap(b) >= n {
				return b[:n]
			}
			// too small: drop it, try the next
		default:
			return make([]byte, n, max(n, capHint))
		}
	}
}

// Recycle hands back a buffer from Buffer once nothing reads it; a few
// are kept, the others left to the garbage collector.
func (s *Set) Recycle(b []byte) {
	select {
	case s.free <- b:
	default:
	}
}

// Files returns the video files (dataset-relative, sorted, each once) of
// the decoded cameras for the given episodes (nil: every episode), and
// how many frames those episodes have in them per the episodes index
// (to_timestamp - from_timestamp at the dataset's fps).
func (s *Set) Files(episodes []int64) (files []string, frames int64, err error) {
	want := map[int64]bool{}
	for _, e := range episodes {
		want[e] = true
	}
	seen := map[string]bool{}
	for ep, m := range s.spans {
		if episodes != nil && !want[ep] {
			continue
		}
		for _, c := range s.Cameras {
			sp, ok := m[c.Key]
			if !ok {
				continue
			}
			name, err := s.Info.VideoFile(c.Key, sp.Chunk, sp.File)
			if err != nil {
				return nil, 0, err
			}
			if !seen[name] {
				seen[name] = true
				files = append(files, name)
			}
			n, ok := schema.SecondsToFrames(sp.To-sp.From, s.Info.FPS)
			if !ok {
				return nil, 0, fmt.Errorf("episode %d, camera %s: from_timestamp %g, to_timestamp %g: not a span of frames at %g fps", ep, c.Key, sp.From, sp.To, s.Info.FPS)
			}
			frames += n
		}
	}
	sort.Strings(files)
	return files, frames, nil
}

// DefaultTolerance is LeRobotDataset's default tolerance_s.
const DefaultTolerance = 1e-4

// NewSet prepares decoding keys. resize (h, w), when non-zero, sets every
// camera's frame size.
func NewSet(d Decoder, info *schema.Info, spans []shard.VideoSpan, keys []string, resizeH, resizeW int, tol float64, loc Locator) (*Set, error) {
	s := &Set{Decoder: d, Info: info, Tolerance: tol, Locate: loc, spans: map[int64]map[string]shard.VideoSpan{},
		free: make(chan []byte, 8)}
	if s.Tolerance <= 0 {
		s.Tolerance = DefaultTolerance
	}
	for _, k := range keys {
		f, ok := info.Feature(k)
		if !ok || f.DType != schema.DTypeVideo {
			return nil, fmt.Errorf("camera %s: not a video feature of info.json", k)
		}
		cam, err := NewCamera(f, DepthMillimetres)
		if err != nil {
			return nil, err
		}
		if resizeH > 0 && resizeW > 0 {
			cam.H, cam.W = resizeH, resizeW
		}
		s.Cameras = append(s.Cameras, cam)
	}
	for _, sp := range spans {
		m := s.spans[sp.Episode]
		if m == nil {
			m = map[string]shard.VideoSpan{}
			s.spans[sp.Episode] = m
		}
		m[sp.Key] = sp
	}
	s.resize = resizeH > 0 && resizeW > 0
	s.needs = fileNeeds(info, s.Cameras, spans, s.resize)
	return s, nil
}

// fileNeeds returns what the episodes of the decoded cameras need of
// each of their video files (CheckStream): every episode the index puts
// in a file counts, selected or not, so that every consumer of a dataset
// judges a file the same way.
func fileNeeds(info *schema.Info, cams []Camera, spans []shard.VideoSpan, resize bool) map[string]FileNeeds {
	byKey := map[string]Camera{}
	for _, c := range cams {
		byKey[c.Key] = c
	}
	needs := map[string]FileNeeds{}
	for _, sp := range spans {
		c, ok := byKey[sp.Key]
		if !ok {
			continue
		}
		name, err := info.VideoFile(sp.Key, sp.Chunk, sp.File)
		if err != nil {
			continue // its segments report it
		}
		n := needs[name]
		if !resize {
			n.Width, n.Height = c.W, c.H
		}
		n.FPS = info.FPS
		if info.FPS > 0 {
			n.End = max(n.End, sp.From+float64(sp.Length)/info.FPS)
		}
		needs[name] = n
	}
	return needs
}

// fileCheck is one video file's CheckStream verdict, shared by its
// segments: done is closed when err is set.
type fileCheck struct {
	done chan struct{}
	err  error
}

// checkFile checks the video file name (local path path) once, before
// any of its frames is used: with a StreamProber decoder, its stream
// against the dataset (CheckStream). A file that fails fails every
// sample of it (with --on-error skip: all of them skipped, counted).
func (s *Set) checkFile(ctx context.Context, name, path string) error {
	p, ok := s.Decoder.(StreamProber)
	if !ok {
		return nil
	}
	s.checksMu.Lock()
	if s.checks == nil {
		s.checks = map[string]*fileCheck{}
	}
	fc := s.checks[name]
	if fc == nil {
		fc = &fileCheck{done: make(chan struct{})}
		s.checks[name] = fc
		s.checksMu.Unlock()
		si, err := p.ProbeStream(ctx, path)
		if err == nil {
			err = CheckStream(si, s.needs[name], s.Tolerance)
		}
		if ctx.Err() != nil {
			s.checksMu.Lock()
			delete(s.checks, name) // cancelled: not a verdict
			s.checksMu.Unlock()
			err = ctx.Err()
		}
		fc.err = err
		close(fc.done)
		return err
	}
	s.checksMu.Unlock()
	select {
	case <-fc.done:
		return fc.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fill decodes camera cam's frames for the samples (episodes[i],
// index[i], timestamps[i]) into dst (len(episodes) frames of
// Cameras[cam].FrameBytes(), CHW; every byte is written). Each run of samples of one episode is
// one segment: one seek, decoded sequentially. A sample whose frame
// cannot be produced is passed to fail with a *FrameError (its bytes in
// dst are zeroed); Fill returns only the context's error. matched, when set,
// is told the file and timestamp of the frame each sample got.
func (s *Set) Fill(ctx context.Context, cam int, episodes, index []int64, timestamps []float32, dst []byte, fail func(i int, err error), matched func(i int, file string, pts float64)) error {
	return s.fill(ctx, cam, episodes, index, timestamps, dst, nil, fail, matched)
}

// FillStored is Fill, but each sample's frame is left in dst (in its
// FrameBytes slot) in the form its decoder gave it — YUV 4:2:0 planes,
// RGB24 rows, 12-bit gray codes: at most the bytes of its batch form —
// and convs[i] (len(episodes)) is set to the FrameConv that makes its
// batch bytes from the slot's first Sizes().src bytes. A sample whose
// convs[i] is nil has its batch bytes in its slot already (a failed
// frame's zeros, or a frame whose stored form would not fit). The
// conversion is thus done once, where the frame is written (see
// collate.Conv), and what is held and copied before is the smaller form.
func (s *Set) FillStored(ctx context.Context, cam int, episodes, index []int64, timestamps []float32, dst []byte, convs []*FrameConv, fail func(i int, err error), matched func(i int, file string, pts float64)) error {
	if len(convs) != len(episodes) {
		return fmt.Errorf("video: FillStored: %d conversions for %d samples", len(convs), len(episodes))
	}
	return s.fill(ctx, cam, episodes, index, timestamps, dst, convs, fail, matched)
}

// fill is Fill, or FillStored with convs.
func (s *Set) fill(ctx context.Context, cam int, episodes, index []int64, timestamps []float32, dst []byte, convs []*FrameConv, fail func(i int, err error), matched func(i int, file string, pts float64)) error {
	c := s.Cameras[cam]
	fb := c.FrameBytes()
	for start := 0; start < len(episodes); {
		end := start + 1
		for end < len(episodes) && episodes[end] == episodes[start] {
			end++
		}
		var got func(int, string, float64)
		if matched != nil {
			got = func(i int, file string, pts float64) { matched(start+i, file, pts) }
		}
		out := frameOut{dst: dst[start*fb : end*fb], fb: fb}
		if convs != nil {
			out.convs = convs[start:end]
		}
		if err := s.fillEpisode(ctx, c, episodes[start], index[start:end], timestamps[start:end], out, func(i int, err error) { fail(start+i, err) }, got); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// frameOut is where fillEpisode puts a segment's frames: slots of fb
// bytes in dst, converted, or with convs stored as decoded (FillStored).
type frameOut struct {
	dst   []byte
	fb    int
	convs []*FrameConv
	last  *FrameConv // the last conversion made, reused while it fits
}

// put puts frame f of camera c in slot i.
func (o *frameOut) put(i int, c Camera, f Frame) error {
	slot := o.dst[i*o.fb : (i+1)*o.fb]
	if o.convs == nil {
		return putFrame(slot, c, f)
	}
	conv, err := storeFrame(slot, c, f, o.last)
	if err != nil {
		return err
	}
	if conv != nil {
		o.last = conv
	}
	o.convs[i] = conv
	return nil
}

// fail zeroes slot i (a frame that cannot be produced).
func (o *frameOut) fail(i int) {
	clear(o.dst[i*o.fb : (i+1)*o.fb])
	if o.convs != nil {
		o.convs[i] = nil
	}
}

func (s *Set) fillEpisode(ctx context.Context, c Camera, ep int64, index []int64, ts []float32, out frameOut, fail func(int, error), matched func(int, string, float64)) error {
	sp, ok := s.spans[ep][c.Key]
	ferr := func(i int, file string, q, nearest float64, err error) {
		out.fail(i)
		fail(i, &FrameError{File: file, Camera: c.Key, Episode: ep, Index: index[i], Timestamp: float64(ts[i]), Query: q, Nearest: nearest, Err: err})
	}
	if !ok {
		for i := range index {
			ferr(i, "meta/episodes", float64(ts[i]), math.NaN(), errors.New("the episodes index has no video location for this camera and episode"))
		}
		return nil
	}
	name, err := s.Info.VideoFile(c.Key, sp.Chunk, sp.File)
	if err != nil {
		for i := range index {
			ferr(i, "info.json video_path", sp.From+float64(ts[i]), math.NaN(), err)
		}
		return nil
	}
	order, queries := sortedQueries(sp.From, ts)
	failAll := func(err error) {
		for k, i := range order {
			ferr(i, name, queries[k], math.NaN(), err)
		}
	}
	margin := s.margin()
	seg := s.segmentOf(c)
	dec, release, err := s.segmentDecoder(ctx, ep, c, name, &seg)
	defer release()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		failAll(err)
		return nil
	}
	handled, err := Select(ctx, dec, seg, queries, s.Tolerance, margin,
		func(m Match) error {
			i := order[m.Query]
			if (m.Frame.Width != c.W || m.Frame.Height != c.H) && !(s.resize && c.Depth != nil) {
				ferr(i, name, queries[m.Query], m.Frame.PTS, fmt.Errorf("frame is %dx%d, info.json says %dx%d (use --resize HxW to resize)", m.Frame.Width, m.Frame.Height, c.W, c.H))
				return nil
			}
			if err := out.put(i, c, m.Frame); err != nil {
				ferr(i, name, queries[m.Query], m.Frame.PTS, err)
				return nil
			}
			if matched != nil {
				matched(i, name, m.Frame.PTS)
			}
			return nil
		},
		func(q int, nearest float64) error {
			ferr(order[q], name, queries[q], nearest, fmt.Errorf("%w (tolerance_s %g)", ErrTolerance, s.Tolerance))
			return nil
		})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		for k := handled; k < len(order); k++ {
			ferr(order[k], name, queries[k], math.NaN(), err)
		}
	}
	return nil
}

// margin is how far around its queries a segment decodes: at least a
// frame interval, so that errors can name the nearest frame.
func (s *Set) margin() float64 {
	if s.Info.FPS > 0 {
		return max(s.Tolerance, 1/s.Info.FPS)
	}
	return s.Tolerance
}

// segmentOf is the segment of camera c's frames, before its file and span
// are set: the output size when FFmpeg resizes, gray12le for depth.
func (s *Set) segmentOf(c Camera) Segment {
	seg := Segment{Gray12: c.Depth != nil}
	if s.resize && c.Depth == nil { // depth: resized in Go, nearest (DepthTable.Fill)
		seg.Width, seg.Height = c.W, c.H
	}
	return seg
}

// Prestarter is a Decoder that can start decoding a segment before the
// segment is asked for (FFmpeg: its process started and seeking), so that
// Decode does not wait for the start. hold is called once the decoder no
// longer needs seg.Path (a reference the caller took for it). An
// optimisation: the frames are the same with or without it.
type Prestarter interface {
	Prestart(ctx context.Context, seg Segment, hold func())
}

// Prestart has the decoder, if it is a Prestarter, start the segment that
// Fill with the same samples would decode first for camera cam (the first
// episode's run of samples) — unless the frame cache holds it, or its
// video file is not yet located and checked by an earlier segment: a
// prestart downloads and probes nothing (Held). It returns once the
// decoder is started or declined; it must return before Release.
func (s *Set) Prestart(ctx context.Context, cam int, episodes []int64, timestamps []float32) {
	p, ok := s.Decoder.(Prestarter)
	if !ok || s.Held == nil || len(episodes) == 0 {
		return
	}
	c := s.Cameras[cam]
	ep := episodes[0]
	n := 1
	for n < len(episodes) && episodes[n] == ep {
		n++
	}
	sp, ok := s.spans[ep][c.Key]
	if !ok {
		return
	}
	name, err := s.Info.VideoFile(c.Key, sp.Chunk, sp.File)
	if err != nil || !s.checked(name) {
		return
	}
	_, queries := sortedQueries(sp.From, timestamps[:n])
	seg := s.segmentOf(c)
	seg.Start, seg.End = querySpan(queries, s.margin())
	if key, ok := s.Frames.fileKey(ctx, s.Decoder, name, c.Key, seg, s.needs[name], s.Tolerance); ok &&
		s.Frames.Cache.Holds(s.Frames.Group, key, seg.Start) {
		return // served from the cache: no process needed
	}
	path, release, ok := s.Held(name)
	if !ok {
		return
	}
	seg.Path = path
	p.Prestart(ctx, seg, release)
}

// checked reports whether video file name passed its stream check (a
// file not yet checked, or failed: false; true when the decoder checks
// no stream).
func (s *Set) checked(name string) bool {
	if _, ok := s.Decoder.(StreamProber); !ok {
		return true
	}
	s.checksMu.Lock()
	fc := s.checks[name]
	s.checksMu.Unlock()
	if fc == nil {
		return false
	}
	select {
	case <-fc.done:
		return fc.err == nil
	default:
		return false
	}
}

// segmentDecoder returns the decoder of a segment of camera c's file
// name: with a frame cache (s.Frames), one that serves what the cache
// holds and locates, checks and decodes the file only for the rest; else
// s.Decoder, with seg.Path the file located and checked (the file's
// stream against the dataset, once per file, before any of its frames is
// used). release releases the file if it was located.
func (s *Set) segmentDecoder(ctx context.Context, ep int64, c Camera, name string, seg *Segment) (Decoder, func(), error) {
	var (
		path, located string
		release       = func() {}
		openErr       error
	)
	open := func(ctx context.Context) (string, error) {
		if located != "" || openErr != nil {
			return path, openErr
		}
		located = name
		s.prepared.Do(func() { s.prepare(ctx, ep, c.Key) })
		p, rel, err := s.Locate(ctx, name)
		if err != nil {
			openErr = err
			return "", err
		}
		release, path = rel, p
		if err := s.checkFile(ctx, name, p); err != nil {
			openErr = err
			return "", err
		}
		return p, nil
	}
	rel := func() { release() }
	if key, ok := s.Frames.fileKey(ctx, s.Decoder, name, c.Key, *seg, s.needs[name], s.Tolerance); ok {
		same := func(ctx context.Context) bool {
			k, ok := s.Frames.fileKey(ctx, s.Decoder, name, c.Key, *seg, s.needs[name], s.Tolerance)
			return ok && k == key
		}
		return &cachedDecoder{c: s.Frames, inner: s.Decoder, key: key, open: open, same: same}, rel, nil
	}
	p, err := open(ctx)
	seg.Path = p
	return s.Decoder, rel, err
}

// sortedQueries returns the samples' order by timestamp and the
// timestamps queried in the file (from + ts), in that order: ascending
// (a run of one episode is, but do not rely on it).
func sortedQueries(from float64, ts []float32) (order []int, queries []float64) {
	order = make([]int, len(ts))
	queries = make([]float64, len(ts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ts[order[a]] < ts[order[b]] })
	for k, i := range order {
		queries[k] = from + float64(ts[i])
	}
	return order, queries
}

// IsNotExist reports whether err says a file is absent.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
