package video

import "encoding/binary"

// ToCHW writes f's RGB pixels to dst (len 3×H×W) as CHW planes: split
// from HWC, or converted from YUV 4:2:0 when f.YUV is set.
func ToCHW(dst []byte, f Frame) {
	if f.YUV != nil {
		f.YUV.toCHW(dst, f.Pix, f.Width, f.Height, hasYUVVector)
		return
	}
	toCHW(dst, f, hasSSSE3)
}

// toCHW is ToCHW, with the vector code (where there is one) only when
// vector is set: tests compare both.
func toCHW(dst []byte, f Frame, vector bool) {
	n := f.Width * f.Height
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	pix := f.Pix[:3*n]
	i := 0
	if vector {
		i = toCHWFast(r, g, b, pix, n)
	}
	// Eight pixels (24 bytes) at a time through 64-bit words.
	for ; i+8 <= n; i += 8 {
		p := pix[3*i : 3*i+24 : 3*i+24]
		w0 := binary.LittleEndian.Uint64(p[0:8])
		w1 := binary.LittleEndian.Uint64(p[8:16])
		w2 := binary.LittleEndian.Uint64(p[16:24])
		// R is at bytes 0,3,…,21 of the 24, G at 1,4,…,22, B at 2,5,…,23.
		rw := w0&0xff | (w0>>24&0xff)<<8 | (w0>>48&0xff)<<16 |
			(w1>>8&0xff)<<24 | (w1>>32&0xff)<<32 | (w1>>56)<<40 |
			(w2>>16&0xff)<<48 | (w2>>40&0xff)<<56
		gw := w0>>8&0xff | (w0>>32&0xff)<<8 | (w0>>56)<<16 |
			(w1>>16&0xff)<<24 | (w1>>40&0xff)<<32 |
			(w2&0xff)<<40 | (w2>>24&0xff)<<48 | (w2>>48&0xff)<<56
		bw := w0>>16&0xff | (w0>>40&0xff)<<8 |
			(w1&0xff)<<16 | (w1>>24&0xff)<<24 | (w1>>48&0xff)<<32 |
			(w2>>8&0xff)<<40 | (w2>>32&0xff)<<48 | (w2>>56)<<56
		binary.LittleEndian.PutUint64(r[i:i+8], rw)
		binary.LittleEndian.PutUint64(g[i:i+8], gw)
		binary.LittleEndian.PutUint64(b[i:i+8], bw)
	}
	for ; i < n; i++ {
		r[i], g[i], b[i] = pix[3*i], pix[3*i+1], pix[3*i+2]
	}
}
