package video

import "image"

// A JPEG image's colour planes come out of Go's image/jpeg as *image.YCbCr,
// its chroma planes at their stored (subsampled) size. PIL, which LeRobot
// decodes image features with, runs libjpeg(-turbo) with its defaults:
// "fancy" upsampling — each output chroma sample a 3:1 triangle blend of the
// nearest stored sample and its neighbour, horizontally (4:2:2) or in both
// directions (4:2:0) — then libjpeg's fixed-point YCbCr → RGB conversion
// (16 fractional bits, rounded table lookups). Go's own conversion instead
// repeats each chroma sample and rounds differently: up to ~90 levels apart
// at colour edges. ycbcrToPlanes follows libjpeg's arithmetic; what is left
// is the inverse DCT, which image/jpeg computes otherwise than libjpeg's
// default (islow): docs/video.md, "Image features".

const (
	yccScaleBits = 16
	yccHalf      = 1 << (yccScaleBits - 1)
)

func yccFix(x float64) int32 { return int32(x*(1<<yccScaleBits) + 0.5) }

// yccTables are libjpeg's YCbCr → RGB lookup tables (jdcolor.c's
// build_ycc_rgb_table), indexed by the chroma sample.
var yccTables = func() (t struct{ crR, cbB, crG, cbG [256]int32 }) {
	for i := range 256 {
		x := int32(i - 128)
		t.crR[i] = (yccFix(1.40200)*x + yccHalf) >> yccScaleBits
		t.cbB[i] = (yccFix(1.77200)*x + yccHalf) >> yccScaleBits
		t.crG[i] = -yccFix(0.71414) * x
		t.cbG[i] = -yccFix(0.34414)*x + yccHalf
	}
	return t
}()

func clamp255(v int32) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// ycbcrToPlanes writes m's pixels as RGB planes (CHW) into dst the way
// libjpeg's default decompression does, for 4:4:4, 4:2:2 and 4:2:0; it
// reports false for other subsamplings (the caller falls back to Go's
// conversion).
func ycbcrToPlanes(m *image.YCbCr, dst []byte) bool {
	r := m.Bounds()
	w, h := r.Dx(), r.Dy()
	var hs, vs int // chroma subsampling factors
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
		hs, vs = 1, 1
	case image.YCbCrSubsampleRatio422:
		hs, vs = 2, 1
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	default:
		return false
	}
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs // libjpeg's downsampled_width and height
	n := w * h
	R, G, B := dst[:n], dst[n:2*n], dst[2*n:3*n]
	cb := make([]byte, 2*cw)
	cr := make([]byte, 2*cw)
	cbRow := func(y int) []byte { return m.Cb[y*m.CStride : y*m.CStride+cw] }
	crRow := func(y int) []byte { return m.Cr[y*m.CStride : y*m.CStride+cw] }
	for y := range h {
		switch vs {
		case 1:
			upsampleH(cb, cbRow(y), hs)
			upsampleH(cr, crRow(y), hs)
		default:
			// Output row 2j blends stored row j with the row above it,
			// 2j+1 with the row below; the image's first and last rows
			// stand in for the missing neighbours.
			j := y / 2
			k := j - 1
			if y%2 == 1 {
				k = j + 1
			}
			k = min(max(k, 0), ch-1)
			upsampleHV(cb, cbRow(j), cbRow(k))
			upsampleHV(cr, crRow(j), crRow(k))
		}
		yrow := m.Y[y*m.YStride : y*m.YStride+w]
		t := &yccTables
		for x, yy := range yrow {
			Y := int32(yy)
			p := y*w + x
			R[p] = clamp255(Y + t.crR[cr[x]])
			G[p] = clamp255(Y + (t.cbG[cb[x]]+t.crG[cr[x]])>>yccScaleBits)
			B[p] = clamp255(Y + t.cbB[cb[x]])
		}
	}
	return true
}

// upsampleH fills out (2·len(in) samples, or len(in) when hs is 1) from
// one stored chroma row: libjpeg's h2v1 fancy upsampling (3:1 triangle
// with alternating rounding; the end samples are copied).
func upsampleH(out, in []byte, hs int) {
	if hs == 1 {
		copy(out, in)
		return
	}
	n := len(in)
	if n == 1 {
		out[0], out[1] = in[0], in[0]
		return
	}
	out[0] = in[0]
	out[1] = byte((int(in[0])*3 + int(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := int(in[i]) * 3
		out[2*i] = byte((v + int(in[i-1]) + 1) >> 2)
		out[2*i+1] = byte((v + int(in[i+1]) + 2) >> 2)
	}
	out[2*n-2] = byte((int(in[n-1])*3 + int(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
}

// upsampleHV fills out (2·len(in) samples) for one output row of 4:2:0
// chroma: libjpeg's h2v2 fancy upsampling, the nearer stored row (in)
// weighted 3 and the farther (far) 1 vertically, then a 3:1 triangle
// horizontally on those column sums, with its biases of 8 and 7.
func upsampleHV(out, in, far []byte) {
	n := len(in)
	col := func(i int) int { return int(in[i])*3 + int(far[i]) }
	if n == 1 {
		c := col(0)
		out[0] = byte((c*4 + 8) >> 4)
		out[1] = byte((c*4 + 7) >> 4)
		return
	}
	this, next := col(0), col(1)
	out[0] = byte((this*4 + 8) >> 4)
	out[1] = byte((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = col(i + 1)
		out[2*i] = byte((this*3 + last + 8) >> 4)
		out[2*i+1] = byte((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = byte((this*3 + last + 8) >> 4)
	out[2*n-1] = byte((this*4 + 7) >> 4)
}
