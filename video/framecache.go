package video

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/framecache"
)

// Frames keeps the frames a Set decodes in a node-local frame cache, and
// serves later segments of the same video files from it instead of
// decoding them again (docs/video.md, "Frame cache"). A segment is looked
// up by the identity of its file's version (Identify), the camera, the
// output size and pixel format, the stream checks' inputs and the
// decoder's build; a hit needs neither the video file nor FFmpeg.
type Frames struct {
	Cache *framecache.Cache
	// Group names the dataset in the cache (what `lrstream cache`
	// lists): its source's ID.
	Group string
	// Identify returns the identity of the version of a dataset file
	// (fetch.Identity); ok false: the file's frames are not cached.
	Identify func(ctx context.Context, name string) (id string, ok bool, err error)
	Log      *slog.Logger

	decOnce sync.Once
	decID   string
	decErr  error
	warn    sync.Once
}

// frameMeta is what an entry's meta records of its frames: every frame
// of an entry has this size and pixel layout.
type frameMeta struct {
	W, H   int
	Format string // "rgb24", "yuv420p" (YUV names the conversion) or "gray12le"
	YUV    string `json:",omitempty"`
	conv   *YUV   // YUV's conversion (resolve)
}

// resolve finds m's YUV conversion.
func (m *frameMeta) resolve() error {
	if m.Format == "yuv420p" {
		if m.conv = yuvByName(m.YUV); m.conv == nil {
			return fmt.Errorf("unknown YUV conversion %q", m.YUV)
		}
	}
	return nil
}

func metaOf(f Frame) frameMeta {
	m := frameMeta{W: f.Width, H: f.Height, Format: "rgb24"}
	switch {
	case f.Gray12:
		m.Format = "gray12le"
	case f.YUV != nil:
		m.Format, m.YUV = "yuv420p", f.YUV.Name
	}
	return m
}

// frame makes a Frame of m's layout for pix.
func (m frameMeta) frame(pts float64, pix []byte) (Frame, error) {
	f := Frame{PTS: pts, Width: m.W, Height: m.H, Pix: pix}
	want := 3 * m.W * m.H
	switch m.Format {
	case "rgb24":
	case "gray12le":
		f.Gray12, want = true, 2*m.W*m.H
	case "yuv420p":
		f.YUV, want = m.conv, yuvSize(m.W, m.H)
		if f.YUV == nil {
			return Frame{}, fmt.Errorf("frame cache: unknown YUV conversion %q", m.YUV)
		}
	default:
		return Frame{}, fmt.Errorf("frame cache: unknown pixel format %q", m.Format)
	}
	if len(pix) != want {
		return Frame{}, fmt.Errorf("frame cache: a %dx%d %s frame of %d bytes, want %d", m.W, m.H, m.Format, len(pix), want)
	}
	return f, nil
}

// fileKey is the cache key of the frames of one file version decoded for
// seg's size and format, with the checks' inputs (needs, tol), the
// decoder's build and the conversion it reproduces (FFmpeg.Conversion: the
// LeRobot backend): anything that changes the pixels or whether they are
// used.
func (c *Frames) fileKey(ctx context.Context, d Decoder, name, camera string, seg Segment, needs FileNeeds, tol float64) (string, bool) {
	if c == nil || c.Cache == nil || c.Identify == nil {
		return "", false
	}
	id, ok, err := c.Identify(ctx, name)
	if err != nil || !ok {
		if err != nil {
			c.warnOnce("frame cache: %s: no identity (%v); its frames are decoded, not cached", name, err)
		}
		return "", false
	}
	if _, err := c.decoderID(ctx, d); err != nil {
		c.warnOnce("frame cache: the decoder's build is unknown (%v); frames are decoded, not cached", c.decErr)
		return "", false
	}
	conv := ""
	if cv, ok := d.(interface{ Conversion() string }); ok {
		conv = cv.Conversion()
	}
	var b strings.Builder
	for _, s := range []string{"v1", id, camera, strconv.Itoa(seg.Width), strconv.Itoa(seg.Height), strconv.FormatBool(seg.Gray12),
		fmt.Sprintf("%d,%d,%v,%v", needs.Width, needs.Height, needs.FPS, needs.End), strconv.FormatFloat(tol, 'g', -1, 64), c.decID, conv} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.String(), true
}

// decoderID names the decoder's build (DecoderIdentity), found once.
// A decoder that can name its build without running (IdentityKey: FFmpeg's
// executable and libraries' stamps) has the answer kept in the cache, so
// that only the first process after an upgrade starts `ffmpeg -version`.
func (c *Frames) decoderID(ctx context.Context, d Decoder) (string, error) {
	c.decOnce.Do(func() {
		c.decID = fmt.Sprintf("%T", d)
		di, ok := d.(DecoderIdentity)
		if !ok {
			return
		}
		var memo string
		if k, ok := d.(interface{ IdentityKey() (string, bool) }); ok && c.Cache != nil {
			if key, ok := k.IdentityKey(); ok {
				memo = "decoder identity\x00" + c.decID + "\x00" + key
				if v, ok := c.Cache.Memo(memo); ok {
					c.decID += "\n" + string(v)
					return
				}
			}
		}
		var v string
		if v, c.decErr = di.Identity(ctx); c.decErr == nil && memo != "" {
			c.Cache.SetMemo(memo, []byte(v))
		}
		c.decID += "\n" + v
	})
	return c.decID, c.decErr
}

func (c *Frames) warnOnce(format string, args ...any) {
	c.warn.Do(func() {
		log := c.Log
		if log == nil {
			log = slog.Default()
		}
		log.Warn(fmt.Sprintf(format, args...))
	})
}

// cachedDecoder is a Decoder serving one file's segments from the cache,
// decoding (with inner, on the path open gives) what it does not hold and
// storing it.
type cachedDecoder struct {
	c     *Frames
	inner Decoder
	key   string
	// open locates the file and checks its stream (once), for a segment
	// the cache does not hold.
	open func(ctx context.Context) (string, error)
	// same reports whether the file is still the version key names
	// (a local file modified while decoding is not stored).
	same func(ctx context.Context) bool
	bufs [2][]byte // the frames handed out alternate between them
	n    int
}

// Decode serves seg from the cache where an entry covers it and decodes
// the rest; the frames are those inner would give, byte for byte.
func (d *cachedDecoder) Decode(ctx context.Context, seg Segment, fn func(Frame) error) error {
	for {
		r, err := d.c.Cache.Lookup(d.c.Group, d.key, seg.Start)
		if err != nil || r == nil {
			return d.decodeAndStore(ctx, seg, fn)
		}
		next, done, err := d.serve(r, seg, fn)
		r.Close()
		if done {
			return err // fn's
		}
		seg.Start = next
		if err != nil {
			// The entry could not be read (damaged, an I/O error): the
			// rest, after the last frame handed out, is decoded — never
			// looked up again, in case the entry cannot be removed.
			return d.decodeAndStore(ctx, seg, fn)
		}
		// The entry ended before seg: the rest from another entry, or
		// decoded.
	}
}

// serve hands fn the frames of r within seg. It returns where the rest of
// seg starts (just after the last frame r covers or handed out) and
// whether seg is done (fn stopped, or a frame past seg.End was reached,
// or r covers seg.End); err is fn's when done, else the entry's.
func (d *cachedDecoder) serve(r *framecache.Reader, seg Segment, fn func(Frame) error) (next float64, done bool, err error) {
	var m frameMeta
	if err := json.Unmarshal(r.Meta(), &m); err != nil {
		return seg.Start, false, fmt.Errorf("%w: meta: %v", framecache.ErrCorrupt, err)
	}
	if err := m.resolve(); err != nil {
		return seg.Start, false, fmt.Errorf("%w: meta: %v", framecache.ErrCorrupt, err)
	}
	next = seg.Start
	r.SkipTo(seg.Start)
	for {
		// Read into a buffer the decoder owns: Select holds the previous frame
		// while it gets the next, and after this entry's reader is closed (its
		// buffers go back to a pool other goroutines draw from) when the
		// segment continues in another entry or is decoded, and after Decode
		// returns. A raw record is read from the file straight into it.
		pts, pix, err := r.NextInto(d.bufs[d.n%2])
		if err != nil {
			if errors.Is(err, io.EOF) {
				if r.Covered() >= seg.End {
					return next, true, nil
				}
				return math.Nextafter(r.Covered(), math.Inf(1)), false, nil
			}
			return next, false, err
		}
		if pts > seg.End {
			return next, true, nil
		}
		d.bufs[d.n%2] = pix
		d.n++
		f, err := m.frame(pts, pix)
		if err != nil {
			return next, false, fmt.Errorf("%w: %v", framecache.ErrCorrupt, err)
		}
		next = math.Nextafter(pts, math.Inf(1))
		if err := fn(f); err != nil {
			if errors.Is(err, ErrStop) {
				return next, true, nil
			}
			return next, true, err
		}
	}
}

// decodeAndStore decodes seg with the inner decoder, handing every frame
// to fn and to a new cache entry, which is published when the segment was
// decoded to its end or to where fn stopped, from a file that did not
// change meanwhile.
func (d *cachedDecoder) decodeAndStore(ctx context.Context, seg Segment, fn func(Frame) error) error {
	path, err := d.open(ctx)
	if err != nil {
		return err
	}
	seg.Path = path
	var w *framecache.Writer
	var m frameMeta
	last, stopped, storing := math.NaN(), false, true
	err = d.inner.Decode(ctx, seg, func(f Frame) error {
		if storing {
			if w == nil {
				m = metaOf(f)
				meta, _ := json.Marshal(m)
				w = d.c.Cache.Create(d.c.Group, d.key, seg.Start, meta)
			}
			if metaOf(f) != m { // frames of another size or layout: not stored
				w.Abort()
				storing = false
			} else {
				w.Add(f.PTS, f.Pix)
			}
		}
		last = f.PTS
		err := fn(f)
		stopped = errors.Is(err, ErrStop)
		return err
	})
	covered := seg.End
	if stopped || math.IsInf(covered, 1) {
		// Every frame up to the last one handed out (or to the end of
		// the file: there is none after it).
		covered = last
	}
	if err != nil || !storing || w == nil || !d.same(ctx) {
		w.Abort()
		return err
	}
	if cerr := w.Commit(covered); cerr != nil {
		d.c.warnOnce("frame cache: %v; frames are decoded", cerr)
	}
	return nil
}
