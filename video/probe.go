package video

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// lazyYUV is a conversion found once and shared: done is closed when yuv
// is set (nil: frames come as RGB24).
type lazyYUV struct {
	done chan struct{}
	yuv  *YUV
}

// yuvKey is what decides whether a video's frames can come as YUV: size
// and colorspace.
type yuvKey struct {
	w, h       int
	space, rng string
}

// maxProbes bounds the videos whose probe a decoder remembers.
const maxProbes = 4096

// yuv returns the conversion for the frames of the video at path (nil: they
// come as RGB24): probed once per path with ffprobe, checked once per size
// and colorspace against ffmpeg. Only the context's error is returned: a
// video that cannot be probed or checked comes as RGB24, and FFmpeg
// reports what is wrong with it.
func (d *FFmpeg) yuv(ctx context.Context, path string) (*YUV, error) {
	if d.RGB24 || d.Probe == "" {
		return nil, nil
	}
	return once(ctx, d, &d.probes, path, func() *YUV {
		key, ok := d.probe(ctx, path)
		if !ok {
			return nil
		}
		if d.ignoresTags(false) {
			key.space = "" // converted as an untagged stream (BT.601)
		}
		y, _ := once(ctx, d, &d.checks, key, func() *YUV { return d.check(ctx, key) })
		return y
	})
}

// Prepare implements Preparer: it probes and checks the video at path
// (the first segment of a file otherwise waits for both, ~0.1 s each).
func (d *FFmpeg) Prepare(ctx context.Context, path string) {
	_, _ = d.yuv(ctx, path)
}

// once returns m[k]'s conversion, finding it with find when m has none
// (concurrent callers of one key wait for the first).
func once[K comparable](ctx context.Context, d *FFmpeg, m *map[K]*lazyYUV, k K, find func() *YUV) (*YUV, error) {
	d.mu.Lock()
	if *m == nil || len(*m) >= maxProbes {
		*m = map[K]*lazyYUV{}
	}
	e := (*m)[k]
	if e == nil {
		e = &lazyYUV{done: make(chan struct{})}
		(*m)[k] = e
		d.mu.Unlock()
		e.yuv = find()
		if ctx.Err() != nil {
			// Cancelled, not found wanting: a later call looks again.
			d.mu.Lock()
			if (*m)[k] == e {
				delete(*m, k)
			}
			d.mu.Unlock()
		}
		close(e.done)
		return e.yuv, nil
	}
	d.mu.Unlock()
	select {
	case <-e.done:
		return e.yuv, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// probe returns the size and colorspace of the video at path when its
// first video stream is yuv420p of even size in a colorspace YUV knows.
// (ProbeStream: the same ffprobe run as the file's check.)
func (d *FFmpeg) probe(ctx context.Context, path string) (yuvKey, bool) {
	si, err := d.ProbeStream(ctx, path)
	if err != nil {
		return yuvKey{}, false
	}
	return yuvKeyOf(si)
}

// parseProbe reads ffprobe's JSON report of a video stream.
func parseProbe(out []byte) (yuvKey, bool) {
	si, err := parseStreamInfo(out)
	if err != nil {
		return yuvKey{}, false
	}
	return yuvKeyOf(si)
}

// yuvKeyOf returns a stream's size and colorspace, and whether its frames
// can come as YUV: yuv420p of even size in a colorspace YUV knows.
func yuvKeyOf(st StreamInfo) (yuvKey, bool) {
	k := yuvKey{w: st.Width, h: st.Height, space: st.ColorSpace, rng: st.ColorRange}
	ok := st.PixFmt == "yuv420p" && k.w > 0 && k.h > 0 && k.w%2 == 0 && k.h%2 == 0 &&
		k.w <= 1<<15 && k.h <= 1<<15 && yuvFor(k.space, k.rng) != nil
	return k, ok
}

// check returns YUV's conversion for key when it reproduces this ffmpeg's
// own conversion of a test pattern of that size and colorspace byte for
// byte (nil otherwise: an FFmpeg build or CPU whose arithmetic differs).
func (d *FFmpeg) check(ctx context.Context, key yuvKey) *YUV {
	conv := yuvFor(key.space, key.rng)
	if conv == nil || !d.matches(ctx, key, conv) {
		return nil
	}
	return conv
}

// matches reports whether conv reproduces this ffmpeg's conversion of
// test patterns of key's size and colorspace byte for byte.
func (d *FFmpeg) matches(ctx context.Context, key yuvKey, conv *YUV) bool {
	frames := yuvPattern(key.w, key.h)
	args := []string{"-nostdin", "-hide_banner", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", fmt.Sprintf("%dx%d", key.w, key.h), "-i", "pipe:0"}
	if p := setparams(key.space, key.rng); p != "" {
		args = append(args, "-vf", p)
	}
	args = append(args, "-sws_flags", d.swsFlags(false), "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	cmd := Command(ctx, d.Path, args...)
	cmd.Stdin = bytes.NewReader(bytes.Join(frames, nil))
	want, err := cmd.Output()
	n := key.w * key.h
	if err != nil || len(want) != 3*n*len(frames) {
		return false
	}
	got := make([]byte, 3*n)
	for i, f := range frames {
		conv.toCHW(got, f, key.w, key.h, hasYUVVector)
		rgb := want[3*n*i : 3*n*(i+1)]
		for p := range n {
			if got[p] != rgb[3*p] || got[n+p] != rgb[3*p+1] || got[2*n+p] != rgb[3*p+2] {
				return false
			}
		}
	}
	return true
}

// setparams is the filter tagging raw frames with a video's colorspace and
// range ("" when both are unknown).
func setparams(space, rng string) string {
	var p []string
	if space != "" && space != "unknown" {
		p = append(p, "colorspace="+space)
	}
	if rng != "" && rng != "unknown" {
		p = append(p, "range="+rng)
	}
	if len(p) == 0 {
		return ""
	}
	return "setparams=" + strings.Join(p, ":")
}

// yuvPattern returns two w×h yuv420p frames whose chroma samples run
// through the (U, V) pairs (every one when the frame has 65,536 or more
// chroma samples) with luma from black to white and beyond the
// limited range in each.
func yuvPattern(w, h int) [][]byte {
	cw, ch := w/2, h/2
	var frames [][]byte
	for f := range 2 {
		buf := make([]byte, yuvSize(w, h))
		ys, us, vs := buf[:w*h], buf[w*h:w*h+cw*ch], buf[w*h+cw*ch:]
		for k := range cw * ch {
			uv := k + f*cw*ch
			us[k], vs[k] = byte(uv>>8), byte(uv)
		}
		for p := range ys {
			ys[p] = byte(p*67 + p/w*29 + f*128)
		}
		frames = append(frames, buf)
	}
	return frames
}
