package video

import "fmt"

// YUV is the conversion of a decoder's YUV 4:2:0 frames to RGB: swscale's
// unscaled 8-bit YUV 4:2:0 → RGB24 arithmetic (16-bit fixed point, the
// code FFmpeg runs on x86 for -pix_fmt rgb24 and PyAV for
// to_ndarray(format="rgb24")), carried out in Go so that ffmpeg can send
// half the bytes through its pipe and lrstream writes CHW planes directly.
// A decoder uses it only after checking that it reproduces its FFmpeg's own
// conversion byte for byte (FFmpeg.Calibrate); otherwise frames come as
// RGB24 from FFmpeg.
//
// Per pixel, with chroma shared by each 2×2 block:
//
//	y' = ((Y<<3) - yOff) * cy >> 16
//	u' = (U<<3) - 1024,  v' = (V<<3) - 1024
//	R = clip8(y' + (v'*vr >> 16))
//	G = clip8(y' + sat16((u'*ug >> 16) + (v'*vg >> 16)))
//	B = clip8(y' + (u'*ub >> 16))
//
// where >> 16 is the high half of the signed 32-bit product (PMULHW) and
// the sums saturate to int16 (PADDSW) before clipping to 0..255.
type YUV struct {
	// Name is the matrix and range ("bt601 limited", "bt709 limited").
	Name                     string
	cy, yOff, vr, ub, ug, vg int16
	// vec holds yOff, cy, vr, ub, ug, vg and 1024, each sixteen times (a
	// 256-bit register), for the vector code.
	vec [7][16]int16
}

// yuvMatrix is a YUV→RGB matrix as swscale's inverse tables give it:
// V→R, U→B, U→G and V→G in 16.16 fixed point (the G terms positive,
// subtracted).
type yuvMatrix [4]int64

// The matrices lrstream converts in Go. Other colorspaces, full range and
// other pixel formats come from FFmpeg as RGB24.
var (
	matrixBT601 = yuvMatrix{104597, 132201, 25675, 53279}
	matrixBT709 = yuvMatrix{117489, 138438, 13975, 34925}
)

// limitedYUV returns the conversion of limited-range ("tv") YUV with m at
// default contrast, saturation and brightness.
func limitedYUV(name string, m yuvMatrix) *YUV {
	cy := int64(1<<16) * 255 / 219 // luma 16..235 → 0..255
	oy := int64(16 << 16)
	c := &YUV{
		Name: name,
		cy:   round16(cy << 13), yOff: round16(oy << 3),
		vr: round16(m[0] << 13), ub: round16(m[1] << 13),
		ug: round16(-m[2] << 13), vg: round16(-m[3] << 13),
	}
	for i, k := range []int16{c.yOff, c.cy, c.vr, c.ub, c.ug, c.vg, 1024} {
		for j := range c.vec[i] {
			c.vec[i][j] = k
		}
	}
	return c
}

// round16 rounds a 16.16 fixed-point value to an int16 coefficient.
func round16(f int64) int16 {
	r := (f + 1<<15) >> 16
	return int16(min(max(r, -0x7fff-1), 0x7fff))
}

// yuvFor returns the Go conversion for frames of FFmpeg's colorspace and
// range names (as ffprobe reports them), or nil when there is none.
func yuvFor(space, rng string) *YUV {
	if rng != "tv" && rng != "unknown" && rng != "" {
		return nil
	}
	switch space {
	case "", "unknown", "bt470bg", "smpte170m":
		return limitedYUV("bt601 limited", matrixBT601)
	case "bt709":
		return limitedYUV("bt709 limited", matrixBT709)
	}
	return nil
}

// yuvNames are the names (YUV.Name) of every conversion yuvFor and
// yuvByName return.
func yuvNames() []string { return []string{"bt601 limited", "bt709 limited"} }

// yuvByName returns the conversion named name (YUV.Name), or nil.
func yuvByName(name string) *YUV {
	switch name {
	case "bt601 limited":
		return limitedYUV(name, matrixBT601)
	case "bt709 limited":
		return limitedYUV(name, matrixBT709)
	}
	return nil
}

// yuvSize is the byte size of a w×h YUV 4:2:0 planar frame (even w, h).
func yuvSize(w, h int) int { return w*h + 2*(w/2)*(h/2) }

// ToCHW converts the w×h planar YUV 4:2:0 frame yuv (Y plane, then U, then
// V; w and h even) to RGB CHW planes in dst (len 3×w×h).
func (c *YUV) ToCHW(dst, yuv []byte, w, h int) error {
	if w <= 0 || h <= 0 || w%2 != 0 || h%2 != 0 {
		return fmt.Errorf("yuv420p frame %dx%d: width and height must be even", w, h)
	}
	if len(yuv) < yuvSize(w, h) || len(dst) < 3*w*h {
		return fmt.Errorf("yuv420p frame %dx%d: %d bytes in, %d out, want %d and %d", w, h, len(yuv), len(dst), yuvSize(w, h), 3*w*h)
	}
	c.toCHW(dst, yuv, w, h, hasYUVVector)
	return nil
}

// yuvPath is an implementation of the row conversion. ToCHW runs the
// best one the CPU has (yuvBestPath); tests force each.
type yuvPath uint8

const (
	yuvScalar yuvPath = iota // YUV.row, pixel by pixel
	yuvSSE2                  // yuvRowSSE2, 16 pixels a step (amd64)
	yuvAVX2                  // yuvRowsAVX2, 32 pixels of two rows a step, then SSE2 (amd64 with AVX2)
)

func (p yuvPath) String() string {
	switch p {
	case yuvScalar:
		return "scalar"
	case yuvSSE2:
		return "sse2"
	case yuvAVX2:
		return "avx2"
	}
	return fmt.Sprintf("yuvPath(%d)", uint8(p))
}

// toCHW is ToCHW without checks, with the vector code (where there is
// one: the best this CPU runs) only when vector is set.
func (c *YUV) toCHW(dst, yuv []byte, w, h int, vector bool) {
	p := yuvScalar
	if vector {
		p = yuvBestPath
	}
	c.toCHWPath(dst, yuv, w, h, p)
}

// toCHWPath is ToCHW without checks (w and h even) through row conversion
// p, which must be available on this CPU (yuvPathAvailable): tests compare
// them all.
func (c *YUV) toCHWPath(dst, yuv []byte, w, h int, p yuvPath) {
	n := w * h
	cw := w / 2
	ys, us, vs := yuv[:n], yuv[n:n+cw*(h/2)], yuv[n+cw*(h/2):n+2*cw*(h/2)]
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	for row := 0; row < h; row += 2 {
		// The two rows sharing chroma row row/2: vector blocks first,
		// then each row's tail pixel by pixel.
		o, co := row*w, (row/2)*cw
		x := 0
		if p != yuvScalar {
			x = c.rowPairFast(p, r[o:o+2*w], g[o:o+2*w], b[o:o+2*w], ys[o:o+2*w], us[co:co+cw], vs[co:co+cw], w)
		}
		for k := o; k < o+2*w; k += w {
			c.row(r[k+x:k+w], g[k+x:k+w], b[k+x:k+w], ys[k+x:k+w], us[co+x/2:co+cw], vs[co+x/2:co+cw])
		}
	}
}

// row converts one row (even length) pixel by pixel.
func (c *YUV) row(r, g, b, ys, us, vs []byte) {
	cy, yOff := int32(c.cy), c.yOff
	vr, ub, ug, vg := int32(c.vr), int32(c.ub), int32(c.ug), int32(c.vg)
	for i := range len(ys) / 2 {
		u := int32(int16(us[i])<<3 - 1024)
		v := int32(int16(vs[i])<<3 - 1024)
		bu := u * ub >> 16
		rv := v * vr >> 16
		gc := sat16(u*ug>>16 + v*vg>>16)
		for k := 2 * i; k < 2*i+2; k++ {
			yv := int32(int16(uint16(ys[k])<<3)-yOff) * cy >> 16
			r[k] = clip8(sat16(yv + rv))
			g[k] = clip8(sat16(yv + gc))
			b[k] = clip8(sat16(yv + bu))
		}
	}
}

func sat16(v int32) int32 { return min(max(v, -32768), 32767) }

func clip8(v int32) byte { return byte(min(max(v, 0), 255)) }
