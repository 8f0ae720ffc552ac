package video

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/internal/pipesize"
)

// FFmpeg is a Decoder running the ffmpeg executable. A process seeks once
// (-ss before -i: to the keyframe at or before the segment's start, then
// decodes and discards up to it), keeps the file's timestamps (-copyts,
// -fps_mode passthrough: no frame is duplicated or dropped), and writes
// frames to a pipe while the showinfo filter logs each frame's exact pts
// and time base on stderr. The RGB conversion uses swscale's bilinear
// flags, which is what PyAV's frame.to_ndarray(format="rgb24") uses
// (LeRobot's pyav backend): the pixels are identical.
//
// The frames of a yuv420p video in a colorspace YUV knows come through the
// pipe as YUV 4:2:0 (half the bytes of RGB24) and are converted in Go
// (Frame.YUV), once this FFmpeg's own RGB24 conversion of a test pattern
// of the video's size and colorspace has been checked to be byte-identical
// (once per size and colorspace); every other video, and every frame when
// RGB24 is set or ffprobe is absent, comes as RGB24 from FFmpeg.
//
// A process decodes on to the end of its file: when a segment is done it
// is kept (at most MaxIdle of them) and the next segment of the same file
// that starts at or after the frames it has read (at most MaxSkip seconds
// ahead) continues from it, without a new process or seek; a segment whose
// predecessor in the file is being decoded waits for it. Either way a
// segment gets exactly the frames of the file with Start <= pts <= End,
// chosen by lrstream from the frames' timestamps. Close ends the kept
// processes.
//
// An FFmpeg must not be copied after first use.
type FFmpeg struct {
	// Path is the ffmpeg executable.
	Path string
	// Threads is ffmpeg's decoder thread count (-threads); 0 lets FFmpeg
	// choose.
	Threads int
	// MaxIdle is how many processes are kept between segments (0:
	// DefaultMaxIdle; negative: none, one process per segment).
	MaxIdle int
	// MaxSkip is how many seconds of video a kept process may decode and
	// discard to reach a later segment's start (0: DefaultMaxSkip).
	MaxSkip float64
	// Hold is how many of the last frames read a process holds (at least
	// 2, the default) for a later segment that starts at or before them:
	// segments overlapping by k frames can share a process with Hold k+2.
	// Each held frame is 3×W×H bytes.
	Hold int
	// Lanes is how many processes may decode one file at once (0: 1): a
	// segment whose predecessor in the file is being decoded waits for
	// that process only when the file has Lanes processes decoding, else
	// it starts its own. One lane costs no process starts but decodes a
	// file's segments one after the other; more lanes let more cores
	// decode one file (few cameras, many workers) at one process start
	// and seek per segment that cannot wait.
	Lanes int
	// Probe is the ffprobe executable, which tells a video's pixel format
	// and colorspace (NewFFmpeg: beside ffmpeg, else on PATH); empty: every
	// frame comes as RGB24 from FFmpeg.
	Probe string
	// RGB24 makes FFmpeg convert every frame to RGB24 itself (no YUV
	// frames; for comparisons).
	RGB24 bool
	// Backend is the LeRobot video backend whose RGB frames to reproduce
	// where the two differ: BackendTorchcodec (the default, "") or
	// BackendPyAV (backend.go).
	Backend string

	mu      sync.Mutex
	probes  map[string]*lazyYUV    // by video path
	streams map[string]*lazyStream // ProbeStream's answers, by video path
	grays   sync.Map               // video path → error of grayCheck (depth cameras)
	checks  map[yuvKey]*lazyYUV    // by size and colorspace
	live    []*stream              // running processes, busy or kept
	waiters []*Segment             // segments waiting for a busy process
	changed chan struct{}          // closed when a process is released
	tick    uint64
	started int // processes started (ProcessesStarted)
	// prestarted and prestartUsed count the processes Prestart started
	// and those a segment then used (Prestarts).
	prestarted, prestartUsed int

	idOnce sync.Once // Identity
	id     string
	idErr  error
}

// DefaultMaxIdle is FFmpeg.MaxIdle's default.
const DefaultMaxIdle = 4

// DefaultMaxSkip is FFmpeg.MaxSkip's default: decoding and discarding two
// seconds of 30 fps video costs about what a new process and its seek do.
const DefaultMaxSkip = 2.0

// seekSlack is how far before a segment's start a new process seeks:
// lrstream, not FFmpeg's rounding of -ss, decides which frames are at or
// after the start, so a kept process and a new one give a segment the
// same frames.
const seekSlack = 0.001

// FFmpegEnv names the environment variable that selects the ffmpeg
// executable (a path, or a name looked up on PATH) instead of the first
// `ffmpeg` on PATH: e.g. a statically linked build, which starts in a
// fraction of the time of a distribution's (docs/video.md, "Which
// FFmpeg").
const FFmpegEnv = "LRSTREAM_FFMPEG"

// NewFFmpeg finds the ffmpeg executable: FFmpegEnv's, else the first on
// PATH, with the ffprobe next to it (else the first on PATH). Its absence
// is an error wrapping ErrNoFFmpeg, which says how to install it and how
// to skip cameras.
func NewFFmpeg() (*FFmpeg, error) { return findFFmpeg(os.Getenv(FFmpegEnv)) }

// findFFmpeg is NewFFmpeg with the executable named by exe (a path, or a
// name looked up on PATH; "" for `ffmpeg` on PATH).
func findFFmpeg(exe string) (*FFmpeg, error) {
	name := exe
	if name == "" {
		name = "ffmpeg"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if exe != "" {
			return nil, fmt.Errorf("%w (%s=%s: %v)", ErrNoFFmpeg, FFmpegEnv, exe, err)
		}
		return nil, fmt.Errorf("%w (%v)", ErrNoFFmpeg, err)
	}
	probe := filepath.Join(filepath.Dir(p), "ffprobe")
	if st, err := os.Stat(probe); err != nil || st.IsDir() {
		if probe, err = exec.LookPath("ffprobe"); err != nil {
			// Every video file is checked with ffprobe before its
			// frames are used (Set, CheckStream).
			return nil, fmt.Errorf("%w (%v)", ErrNoFFmpeg, errNoProbe)
		}
	}
	return &FFmpeg{Path: p, Probe: probe}, nil
}

// Args returns the ffmpeg command line (without the executable) of a
// process starting at seg (it decodes to the end of the file), writing
// RGB24 frames.
func (d *FFmpeg) Args(seg Segment) []string { return d.args(seg, "rgb24") }

func (d *FFmpeg) args(seg Segment, pixFmt string) []string {
	start := max(seg.Start-seekSlack, 0)
	args := []string{"-nostdin", "-hide_banner", "-nostats", "-loglevel", "info", "-xerror"}
	if d.Threads > 0 {
		args = append(args, "-threads", strconv.Itoa(d.Threads))
	}
	args = append(args,
		"-ss", formatSeconds(start), "-copyts",
		"-i", seg.Path, "-map", "0:v:0", "-an", "-sn", "-dn")
	vf := "showinfo=checksum=0"
	if seg.Width > 0 && seg.Height > 0 {
		vf = fmt.Sprintf("scale=%d:%d:flags=bilinear,showinfo=checksum=0", seg.Width, seg.Height)
	}
	muxer := "rawvideo"
	if pixFmt == "yuv420p" {
		muxer = "yuv4mpegpipe" // the planes as decoded: nothing is converted
	} else if d.ignoresTags(seg.Gray12) {
		vf = "setparams=colorspace=unknown," + vf
	}
	return append(args, "-vf", vf, "-fps_mode", "passthrough", "-sws_flags", d.swsFlags(seg.Gray12),
		"-f", muxer, "-pix_fmt", pixFmt, "pipe:1")
}

// formatSeconds formats s for an ffmpeg time option, exactly enough for
// microsecond timestamps.
func formatSeconds(s float64) string { return strconv.FormatFloat(s, 'f', 6, 64) }

// frameInfo is what showinfo logs about one frame.
type frameInfo struct {
	pts  float64
	w, h int
}

// Decode implements Decoder.
func (d *FFmpeg) Decode(ctx context.Context, seg Segment, fn func(Frame) error) error {
	yuv, err := d.segmentForm(ctx, seg)
	if err != nil {
		return err
	}
	for {
		s, pre, err := d.acquire(ctx, seg, yuv)
		if err != nil {
			return err
		}
		delivered := false
		keep, err := s.segment(ctx, seg, func(f Frame) error {
			delivered = true
			return fn(f)
		})
		if cerr := ctx.Err(); cerr != nil {
			keep, err = false, cerr
		}
		d.release(s, keep)
		if err != nil && pre && !delivered {
			// A prestarted process that failed before its first frame
			// (its start is not this segment's doing): the segment gets
			// a process of its own, which reports any real error.
			continue
		}
		return err
	}
}

// segmentForm checks seg's file and returns the YUV conversion its frames
// come through (nil: RGB24 or gray12le from FFmpeg).
func (d *FFmpeg) segmentForm(ctx context.Context, seg Segment) (*YUV, error) {
	if _, err := os.Stat(seg.Path); err != nil {
		return nil, fmt.Errorf("video file: %w", err)
	}
	if seg.Gray12 {
		return nil, d.grayCheck(ctx, seg.Path)
	}
	if seg.Width == 0 && seg.Height == 0 {
		return d.yuv(ctx, seg.Path)
	}
	return nil, nil
}

// Prestart implements Prestarter: unless a process can continue to seg
// (kept, or decoding an earlier segment of the file), it starts one for
// seg and keeps it, ready, for the Decode of seg — which then waits for
// neither the process's start (~50 ms of CPU for a distribution's
// dynamically linked FFmpeg) nor its seek. At most MaxIdle prestarted
// processes wait at a time, besides the MaxIdle kept ones; Close ends
// them. hold, when not nil, releases the caller's
// reference to seg.Path: it is called once the process is used or ended,
// or at once when none is started. Errors are left to Decode: a
// prestarted process that fails before its first frame is replaced there
// by a new one.
func (d *FFmpeg) Prestart(ctx context.Context, seg Segment, hold func()) {
	s, stale := d.prestartStream(ctx, seg)
	if stale != nil {
		stale.stop()
	}
	if s == nil {
		if hold != nil {
			hold()
		}
		return
	}
	s.file = hold
	err := s.start(d)
	d.mu.Lock()
	if err != nil || ctx.Err() != nil { // failed, or the run ended meanwhile
		d.live = slices.DeleteFunc(d.live, func(x *stream) bool { return x == s })
		d.notify()
		d.mu.Unlock()
		if err == nil {
			s.stop()
		}
		s.unhold()
		return
	}
	s.busy, s.starting = false, false
	d.tick++
	s.used = d.tick
	d.notify()
	d.mu.Unlock()
}

// prestartStream registers a process to prestart for seg, busy while it
// starts, or returns nil when none should be: seg's file is not usable
// (Decode reports it), or a process can continue to seg. When MaxIdle
// prestarted processes are waiting already, the one prestarted first is
// taken out (stale, for the caller to stop: its segment has most likely
// gone to another process); when they are all still starting, none is
// prestarted.
func (d *FFmpeg) prestartStream(ctx context.Context, seg Segment) (s, stale *stream) {
	yuv, err := d.segmentForm(ctx, seg)
	if err != nil || ctx.Err() != nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.maxIdle() == 0 || d.continues(seg) {
		return nil, nil
	}
	if d.waitingPrestarts() >= d.maxIdle() {
		oldest, _ := d.oldestIdle(true)
		if oldest < 0 {
			return nil, nil
		}
		stale = d.live[oldest]
		d.live = slices.Delete(d.live, oldest, oldest+1)
	}
	s = d.newStream(seg, yuv)
	d.prestarted++
	s.pre, s.starting = true, true
	d.live = append(d.live, s)
	return s, stale
}

// continues reports whether a live process can continue to seg: one kept
// that serves it, one starting for it, or one decoding an earlier segment
// of the file that seg may wait for. d.mu is held.
func (d *FFmpeg) continues(seg Segment) bool {
	for _, s := range d.live {
		if !s.sameVideo(seg) {
			continue
		}
		if (!s.busy || s.starting) && s.serves(seg, d.maxSkip()) {
			return true
		}
		if s.busy && !s.starting && s.seg.Start <= seg.Start && s.leadsTo(seg, d.maxSkip()) {
			return true
		}
	}
	return false
}

// waitingPrestarts counts the prestarted processes not yet used. d.mu is
// held.
func (d *FFmpeg) waitingPrestarts() int {
	n := 0
	for _, s := range d.live {
		if s.pre {
			n++
		}
	}
	return n
}

// ProcessesStarted is how many ffmpeg processes d has started to decode
// segments (kept processes continuing to later segments start none).
func (d *FFmpeg) ProcessesStarted() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started
}

// Prestarts is how many processes Prestart started, and how many of
// them a segment used (the others were ended unused: a cost).
func (d *FFmpeg) Prestarts() (started, used int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prestarted, d.prestartUsed
}

// Close ends the processes kept for later segments. The decoder stays
// usable: later segments start new processes.
func (d *FFmpeg) Close() error {
	d.mu.Lock()
	var idle []*stream
	live := d.live[:0]
	for _, s := range d.live {
		if s.busy {
			live = append(live, s)
		} else {
			idle = append(idle, s)
		}
	}
	clear(d.live[len(live):])
	d.live = live
	d.mu.Unlock()
	for _, s := range idle {
		s.stop()
	}
	return nil
}

func (d *FFmpeg) maxIdle() int {
	if d.MaxIdle == 0 {
		return DefaultMaxIdle
	}
	return max(d.MaxIdle, 0)
}

func (d *FFmpeg) maxSkip() float64 {
	if d.MaxSkip <= 0 {
		return DefaultMaxSkip
	}
	return d.MaxSkip
}

// acquire returns a process for seg: a kept one that can continue to it,
// the one decoding its predecessor in the file once that is done, or a new
// one.
func (d *FFmpeg) acquire(ctx context.Context, seg Segment, yuv *YUV) (s *stream, pre bool, err error) {
	d.mu.Lock()
	var waiting *Segment
	unwait := func() {
		if waiting != nil {
			d.waiters = slices.DeleteFunc(d.waiters, func(w *Segment) bool { return w == waiting })
			d.notify() // waiters that deferred to this one
			waiting = nil
		}
	}
	for d.maxIdle() > 0 {
		if s := d.kept(seg); s != nil {
			unwait()
			s.busy, s.seg = true, seg
			pre := s.pre
			if pre {
				d.prestartUsed++
			}
			s.pre = false
			d.mu.Unlock()
			if pre {
				s.unhold() // the segment's caller holds the file
			}
			return s, pre, nil
		}
		if !d.worthWaiting(seg) {
			break
		}
		if waiting == nil {
			waiting = &seg
			d.waiters = append(d.waiters, waiting)
		}
		if d.changed == nil {
			d.changed = make(chan struct{})
		}
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			d.mu.Lock()
			unwait()
			d.mu.Unlock()
			return nil, false, ctx.Err()
		}
		d.mu.Lock()
	}
	unwait()
	s = d.newStream(seg, yuv)
	d.live = append(d.live, s)
	d.mu.Unlock()
	if err := s.start(d); err != nil {
		d.mu.Lock()
		d.live = slices.DeleteFunc(d.live, func(x *stream) bool { return x == s })
		d.notify()
		d.mu.Unlock()
		return nil, false, err
	}
	return s, false, nil
}

// newStream is a process, not yet started, for seg, busy and counted as
// started. d.mu is held.
func (d *FFmpeg) newStream(seg Segment, yuv *YUV) *stream {
	d.started++
	return &stream{path: seg.Path, w: seg.Width, h: seg.Height, from: seg.Start, gone: math.Inf(-1), busy: true, seg: seg,
		hold: max(d.Hold, 2), yuv: yuv, gray: seg.Gray12}
}

// kept returns the kept process that can continue to seg with the least
// to skip, unless a waiting segment earlier in the file can use it.
func (d *FFmpeg) kept(seg Segment) *stream {
	var best *stream
	for _, s := range d.live {
		if s.busy || !s.serves(seg, d.maxSkip()) || (best != nil && s.last() <= best.last()) || d.reserved(s, seg) {
			continue
		}
		best = s
	}
	return best
}

// worthWaiting reports whether the file's lanes are all decoding and a
// process busy with a segment before seg in the same file (or kept for an
// earlier waiting segment) will likely be able to continue to seg.
func (d *FFmpeg) worthWaiting(seg Segment) bool {
	for _, s := range d.live {
		if s.starting && s.serves(seg, d.maxSkip()) {
			return true // prestarted for it (or before it), starting
		}
	}
	busy := 0 // the file's processes decoding, or kept for an earlier waiter
	for _, s := range d.live {
		if s.sameVideo(seg) && (s.busy || d.reserved(s, seg)) {
			busy++
		}
	}
	if busy < max(d.Lanes, 1) {
		return false // a free lane: decode in parallel
	}
	for _, s := range d.live {
		if !s.sameVideo(seg) {
			continue
		}
		if !s.busy {
			if s.serves(seg, d.maxSkip()) {
				return true // kept for an earlier waiting segment
			}
			continue
		}
		if s.seg.Start < seg.Start && s.leadsTo(seg, d.maxSkip()) {
			return true
		}
	}
	return false
}

// reserved reports whether the kept process s can continue to a waiting
// segment before seg.
func (d *FFmpeg) reserved(s *stream, seg Segment) bool {
	if s.busy {
		return false
	}
	for _, w := range d.waiters {
		if w.Start < seg.Start && s.serves(*w, d.maxSkip()) {
			return true
		}
	}
	return false
}

// release hands back s after a segment: kept for later segments when keep
// (ending the least recently used kept process beyond MaxIdle), else ended.
func (d *FFmpeg) release(s *stream, keep bool) {
	var end []*stream
	d.mu.Lock()
	s.busy = false
	d.tick++
	s.used = d.tick
	if !keep || d.maxIdle() == 0 {
		d.live = slices.DeleteFunc(d.live, func(x *stream) bool { return x == s })
		end = append(end, s)
	}
	end = append(end, d.trim()...)
	d.notify()
	d.mu.Unlock()
	for _, x := range end {
		x.stop()
	}
}

// trim takes out of d.live the kept processes beyond MaxIdle, least
// recently used first, and returns them to be stopped. Prestarted
// processes waiting for their segment are not counted: they have a bound
// of their own (Prestart), and a process kept between the pieces of the
// episode being decoded must not make way for them. d.mu is held.
func (d *FFmpeg) trim() []*stream {
	var end []*stream
	for {
		oldest, idle := d.oldestIdle(false)
		if idle <= d.maxIdle() {
			return end
		}
		end = append(end, d.live[oldest])
		d.live = slices.Delete(d.live, oldest, oldest+1)
	}
}

// oldestIdle returns the index in d.live of the least recently used idle
// process that is (pre) or is not a prestarted one waiting for its
// segment, -1 when there is none, and how many such processes there are.
// d.mu is held.
func (d *FFmpeg) oldestIdle(pre bool) (oldest, idle int) {
	oldest = -1
	for i, x := range d.live {
		if x.busy || x.pre != pre {
			continue
		}
		idle++
		if oldest < 0 || x.used < d.live[oldest].used {
			oldest = i
		}
	}
	return oldest, idle
}

// notify wakes the segments waiting in acquire. d.mu is held.
func (d *FFmpeg) notify() {
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

// stream is one running ffmpeg process decoding a file from a start on.
type stream struct {
	path  string
	w, h  int
	yuv   *YUV    // the frames come as YUV 4:2:0 converted by it (nil: RGB24)
	gray  bool    // the frames come as gray12le (a depth camera)
	from  float64 // the start of the segment it was started for
	cmd   *exec.Cmd
	out   *os.File // the frames' pipe
	infos chan frameInfo
	log   tail
	halt  context.CancelFunc // stops the stderr reader's sends
	errs  sync.WaitGroup     // the stderr reader
	// reaped and werr: wait's outcome.
	reaped sync.Once
	werr   error
	// recent holds the last frames read (at most hold), oldest first: a
	// later segment starting at or before them gets them again. gone is
	// the latest pts read and no longer held (-Inf: none).
	recent  []Frame
	hold    int
	started bool // the yuv4mpeg header is read
	gone    float64
	// file, when set, releases the reference to the video file a
	// prestarted process kept until used or ended (unhold).
	file     func()
	fileOnce sync.Once
	// Guarded by FFmpeg.mu.
	busy     bool
	starting bool    // prestarted, being started (busy meanwhile)
	pre      bool    // prestarted and not yet used by a segment
	seg      Segment // the segment being decoded, while busy
	used     uint64  // when last released (LRU)
}

// unhold releases the file reference a prestarted process kept.
func (s *stream) unhold() {
	s.fileOnce.Do(func() {
		if s.file != nil {
			s.file()
		}
	})
}

func (s *stream) sameVideo(seg Segment) bool {
	return s.path == seg.Path && s.w == seg.Width && s.h == seg.Height && s.gray == seg.Gray12
}

// last is the pts of the last frame read (the start before any).
func (s *stream) last() float64 {
	if n := len(s.recent); n > 0 {
		return s.recent[n-1].PTS
	}
	return s.from
}

// leadsTo reports whether s, busy with its segment, will reach seg: it
// started at or before seg, which is at most maxSkip seconds past the end
// of s's segment (the caller compares the two segments' starts).
func (s *stream) leadsTo(seg Segment, maxSkip float64) bool {
	return s.from <= seg.Start && seg.Start-s.seg.End <= maxSkip
}

// serves reports whether the kept process s can give seg exactly the
// frames a new process would: it started at or before seg, every frame it
// read at or after seg.Start is still held, and it is at most maxSkip
// seconds before seg.
func (s *stream) serves(seg Segment, maxSkip float64) bool {
	return s.sameVideo(seg) && s.from <= seg.Start && s.gone < seg.Start && seg.Start-s.last() <= maxSkip
}

// start starts the process.
func (s *stream) start(d *FFmpeg) error {
	pixFmt := "rgb24"
	if s.yuv != nil {
		pixFmt = "yuv420p"
	}
	if s.gray {
		pixFmt = "gray12le"
	}
	cmd := command(d.Path, d.args(Segment{Path: s.path, Start: s.from, Width: s.w, Height: s.h}, pixFmt)...)
	// The frames' pipe, made here (not StdoutPipe) to enlarge its kernel
	// buffer: a whole frame fits, so ffmpeg writes it without waiting for
	// lrstream to read, and lrstream reads it in fewer calls.
	out, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("ffmpeg pipe: %w", err)
	}
	pipesize.Grow(out, pipesize.MiB)
	cmd.Stdout = pw
	stderr, err := cmd.StderrPipe()
	if err != nil {
		pw.Close()
		out.Close()
		return err
	}
	err = cmd.Start()
	pw.Close() // the child has its copy; EOF comes when it exits
	if err != nil {
		out.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (%v)", ErrNoFFmpeg, err)
		}
		return fmt.Errorf("start ffmpeg: %w", err)
	}
	ctx, halt := context.WithCancel(context.Background())
	s.cmd, s.out, s.halt = cmd, out, halt
	s.infos = make(chan frameInfo, 64)
	s.errs.Add(1)
	go func() {
		defer s.errs.Done()
		defer close(s.infos)
		parseStderr(ctx, stderr, s.infos, &s.log)
	}()
	return nil
}

// stop ends the process and reaps it; it returns the process's exit error.
func (s *stream) stop() error {
	defer s.unhold()
	s.halt()
	_ = s.cmd.Process.Kill()
	return s.wait()
}

// wait reaps the process once its stderr is read to the end (once; later
// calls return the same error).
func (s *stream) wait() error {
	s.reaped.Do(func() {
		for range s.infos {
		}
		s.errs.Wait()
		s.out.Close()
		s.werr = s.cmd.Wait()
	})
	return s.werr
}

// read reads the next frame into the buffer of the older held frame.
func (s *stream) read() (Frame, bool, error) {
	fi, ok := <-s.infos
	if !ok {
		return Frame{}, false, nil
	}
	n := fi.w * fi.h * 3
	if s.gray {
		n = fi.w * fi.h * 2
	}
	if s.yuv != nil {
		n = yuvSize(fi.w, fi.h)
		if fi.w%2 != 0 || fi.h%2 != 0 {
			return Frame{}, false, fmt.Errorf("frame at %.6f s: %dx%d is not a yuv420p size", fi.pts, fi.w, fi.h)
		}
	}
	if n <= 0 {
		return Frame{}, false, fmt.Errorf("ffmpeg reported a %dx%d frame", fi.w, fi.h)
	}
	head := 0
	if s.yuv != nil {
		if !s.started {
			if err := readY4MHeader(s.out); err != nil {
				return Frame{}, false, err
			}
			s.started = true
		}
		head = len(y4mFrame)
	}
	var buf []byte
	if len(s.recent) == s.hold {
		// The oldest held frame's buffer (delivered at least two
		// callbacks ago) takes the new frame.
		s.gone = max(s.gone, s.recent[0].PTS)
		buf = s.recent[0].raw
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	if cap(buf) < head+n {
		buf = make([]byte, head+n)
	}
	buf = buf[:head+n]
	if _, err := io.ReadFull(s.out, buf); err != nil {
		return Frame{}, false, fmt.Errorf("frame at %.6f s: reading pixels: %w", fi.pts, err)
	}
	if string(buf[:head]) != y4mFrame[:head] {
		return Frame{}, false, fmt.Errorf("frame at %.6f s: ffmpeg's yuv4mpeg frame header is %q, want %q", fi.pts, buf[:head], y4mFrame)
	}
	f := Frame{PTS: fi.pts, Width: fi.w, Height: fi.h, Pix: buf[head:], YUV: s.yuv, Gray12: s.gray, raw: buf}
	s.recent = append(s.recent, f)
	return f, true, nil
}

// y4mFrame is the header ffmpeg's yuv4mpegpipe muxer writes before each
// frame.
const y4mFrame = "FRAME\n"

// readY4MHeader reads the yuv4mpeg stream header line from r, a byte at a
// time (once per process; nothing after the line is consumed).
func readY4MHeader(r io.Reader) error {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 1024 {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("reading ffmpeg's yuv4mpeg header: %w", err)
		}
		if b[0] == '\n' {
			if !bytes.HasPrefix(line, []byte("YUV4MPEG2 ")) {
				return fmt.Errorf("ffmpeg's yuv4mpeg header is %q", line)
			}
			return nil
		}
		line = append(line, b[0])
	}
	return fmt.Errorf("ffmpeg's yuv4mpeg header is longer than 1 KiB")
}

// segment hands fn the frames with seg.Start <= pts <= seg.End: the held
// ones, then new ones, until fn returns ErrStop, a later frame comes or
// the file ends. keep says whether the process can serve later segments.
func (s *stream) segment(ctx context.Context, seg Segment, fn func(Frame) error) (keep bool, err error) {
	kill := context.AfterFunc(ctx, func() { _ = s.cmd.Process.Kill() })
	defer func() {
		if !kill() {
			keep = false // cancelled: the process is being killed
		}
	}()
	deliver := func(f Frame) (done bool, err error) {
		if f.PTS < seg.Start {
			return false, nil
		}
		if f.PTS > seg.End {
			return true, nil
		}
		if err := fn(f); err != nil {
			if errors.Is(err, ErrStop) {
				return true, nil
			}
			return true, err
		}
		return false, nil
	}
	for i := range s.recent {
		if done, err := deliver(s.recent[i]); done || err != nil {
			return err == nil, err
		}
	}
	for {
		f, ok, err := s.read()
		if err != nil {
			return false, err
		}
		if !ok {
			// The end of the file, or of the process.
			if werr := s.wait(); werr != nil {
				return false, fmt.Errorf("ffmpeg: %v: %s", werr, s.log.String())
			}
			return false, nil
		}
		if done, err := deliver(f); done || err != nil {
			return err == nil, err
		}
	}
}

// ErrStop, returned by a Decode callback, ends decoding early without error.
var ErrStop = errors.New("stop decoding")

// parseStderr sends each showinfo frame report to infos and keeps the
// other lines' tail in log.
func parseStderr(ctx context.Context, r io.Reader, infos chan<- frameInfo, log *tail) {
	br := bufio.NewReaderSize(r, 64<<10)
	var num, den int64 = 0, 0
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if fi, tb, kind := parseShowinfo(line); kind == lineTimeBase {
				num, den = tb[0], tb[1]
			} else if kind == lineFrame {
				if den == 0 {
					log.add("showinfo reported a frame before its time base")
				} else {
					fi.pts = float64(fi.ptsInt*num) / float64(den)
					select {
					case infos <- fi.frameInfo:
					case <-ctx.Done():
					}
				}
			} else if kind == lineOther {
				log.add(line)
			}
		}
		if err != nil {
			return
		}
	}
}

type lineKind int

const (
	lineOther lineKind = iota
	lineTimeBase
	lineFrame
	lineShowinfo // a showinfo line of no interest
)

type showFrame struct {
	frameInfo
	ptsInt int64
}

// parseShowinfo parses one stderr line of ffmpeg: a showinfo "config in
// time_base: N/D" line, a frame line ("n: … pts: P pts_time:… s:WxH …"),
// or another line.
func parseShowinfo(line string) (showFrame, [2]int64, lineKind) {
	var f showFrame
	var tb [2]int64
	i := strings.Index(line, "[Parsed_showinfo_")
	if i < 0 {
		return f, tb, lineOther
	}
	rest := line[i:]
	if j := strings.Index(rest, "config in time_base:"); j >= 0 {
		v := strings.TrimSpace(rest[j+len("config in time_base:"):])
		if k := strings.IndexByte(v, ','); k >= 0 {
			v = v[:k]
		}
		n, d, ok := strings.Cut(v, "/")
		num, err1 := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		den, err2 := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
		if !ok || err1 != nil || err2 != nil || num <= 0 || den <= 0 {
			return f, tb, lineShowinfo
		}
		return f, [2]int64{num, den}, lineTimeBase
	}
	if !strings.Contains(rest, " n:") {
		return f, tb, lineShowinfo
	}
	p, ok := field(rest, " pts:")
	if !ok {
		return f, tb, lineShowinfo
	}
	pts, err := strconv.ParseInt(p, 10, 64)
	if err != nil || pts > 1<<40 || pts < -(1<<40) {
		return f, tb, lineShowinfo
	}
	s, ok := field(rest, " s:")
	if !ok {
		return f, tb, lineShowinfo
	}
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w <= 0 || h <= 0 || w > 1<<15 || h > 1<<15 {
		return f, tb, lineShowinfo
	}
	f.ptsInt, f.w, f.h = pts, w, h
	return f, tb, lineFrame
}

// field returns the value after key (skipping spaces) up to the next space.
func field(s, key string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	v := strings.TrimLeft(s[i+len(key):], " ")
	if j := strings.IndexAny(v, " \r\n"); j >= 0 {
		v = v[:j]
	}
	return v, v != ""
}

// tail keeps the last lines of ffmpeg's log (for error messages).
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 8 {
		t.lines = t.lines[len(t.lines)-8:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	for i, l := range t.lines {
		if i > 0 {
			b.WriteString(" | ")
		}
		b.WriteString(l)
	}
	return b.String()
}
