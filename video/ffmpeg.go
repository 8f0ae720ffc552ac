package video

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/internal/pipesize"
)

// FFmpeg is a Decoder running the ffmpeg executable, one process per
// segment: it seeks once (-ss before -i: to the keyframe at or before Start,
// then decodes and discards up to Start), keeps the file's timestamps
// (-copyts, -fps_mode passthrough: no frame is duplicated or dropped), and
// writes RGB24 frames to a pipe while the showinfo filter logs each frame's
// exact pts and time base on stderr. The RGB conversion uses swscale's
// bilinear flags, which is what PyAV's frame.to_ndarray(format="rgb24")
// uses (LeRobot's pyav backend): the pixels are identical.
type FFmpeg struct {
	// Path is the ffmpeg executable.
	Path string
	// Threads is ffmpeg's decoder thread count (-threads); 0 lets FFmpeg
	// choose.
	Threads int
}

// NewFFmpeg finds the ffmpeg executable on PATH. Its absence is an error
// wrapping ErrNoFFmpeg, which says how to install it and how to skip
// cameras.
func NewFFmpeg() (*FFmpeg, error) {
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoFFmpeg, err)
	}
	return &FFmpeg{Path: p}, nil
}

// Args returns the ffmpeg command line (without the executable) decoding
// seg.
func (d *FFmpeg) Args(seg Segment) []string {
	start := max(seg.Start, 0)
	args := []string{"-nostdin", "-hide_banner", "-nostats", "-loglevel", "info", "-xerror"}
	if d.Threads > 0 {
		args = append(args, "-threads", strconv.Itoa(d.Threads))
	}
	args = append(args,
		"-ss", formatSeconds(start), "-to", formatSeconds(max(seg.End, start)), "-copyts",
		"-i", seg.Path, "-map", "0:v:0", "-an", "-sn", "-dn")
	vf := "showinfo=checksum=0"
	if seg.Width > 0 && seg.Height > 0 {
		vf = fmt.Sprintf("scale=%d:%d:flags=bilinear,showinfo=checksum=0", seg.Width, seg.Height)
	}
	return append(args, "-vf", vf, "-fps_mode", "passthrough", "-sws_flags", "bilinear",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
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
func (d *FFmpeg) Decode(parent context.Context, seg Segment, fn func(Frame) error) error {
	if _, err := os.Stat(seg.Path); err != nil {
		return fmt.Errorf("video file: %w", err)
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.Path, d.Args(seg)...)
	// The frames' pipe, made here (not StdoutPipe) to enlarge its kernel
	// buffer: a whole frame fits, so ffmpeg writes it without waiting for
	// lrstream to read, and lrstream reads it in fewer calls.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("ffmpeg pipe: %w", err)
	}
	defer stdout.Close()
	pipesize.Grow(stdout, pipesize.MiB)
	cmd.Stdout = pw
	stderr, err := cmd.StderrPipe()
	if err != nil {
		pw.Close()
		return err
	}
	err = cmd.Start()
	pw.Close() // the child has its copy; EOF comes when it exits
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (%v)", ErrNoFFmpeg, err)
		}
		return fmt.Errorf("start ffmpeg: %w", err)
	}
	infos := make(chan frameInfo, 64)
	var log tail
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(infos)
		parseStderr(ctx, stderr, infos, &log)
	}()
	ferr := readFrames(stdout, infos, fn)
	if ferr != nil {
		cancel() // stop ffmpeg; the stderr reader then sees EOF
	}
	// Drain so the stderr goroutine ends, then reap the process.
	for range infos {
	}
	_, _ = io.Copy(io.Discard, stdout)
	wg.Wait()
	werr := cmd.Wait()
	if err := parent.Err(); err != nil {
		return err
	}
	if ferr != nil {
		if errors.Is(ferr, ErrStop) {
			return nil
		}
		return ferr
	}
	if werr != nil {
		return fmt.Errorf("ffmpeg: %v: %s", werr, log.String())
	}
	return nil
}

// ErrStop, returned by a Decode callback, ends decoding early without error.
var ErrStop = errors.New("stop decoding")

// readFrames reads one frame from r per showinfo report.
func readFrames(r io.Reader, infos <-chan frameInfo, fn func(Frame) error) error {
	var bufs [2][]byte
	k := 0
	for fi := range infos {
		n := fi.w * fi.h * 3
		if n <= 0 {
			return fmt.Errorf("ffmpeg reported a %dx%d frame", fi.w, fi.h)
		}
		k ^= 1
		if cap(bufs[k]) < n {
			bufs[k] = make([]byte, n)
		}
		buf := bufs[k][:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("frame at %.6f s: reading pixels: %w", fi.pts, err)
		}
		if err := fn(Frame{PTS: fi.pts, Width: fi.w, Height: fi.h, Pix: buf}); err != nil {
			return err
		}
	}
	return nil
}

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
