package video

import (
	"context"
	"encoding/binary"
	"math"
)

// Match is how Select hands back the frame chosen for one query.
type Match struct {
	// Query is the index of the query in Select's queries.
	Query int
	// Frame is the chosen frame (its Pix is valid during the callback).
	Frame Frame
}

// Select decodes seg and picks, for each query timestamp (seconds in the
// file, ascending), the decoded frame nearest to it, as LeRobot does
// (decode_video_frames: the argmin of |query - pts| over the decoded
// frames, the earlier frame on a tie), accepting it only when the
// distance is below tol. It calls put for every accepted query and miss
// (with the nearest frame's timestamp, NaN when none was decoded) for every
// other, each query exactly once, in query order, unless decoding fails:
// then it returns the error and the queries not yet handed back are left
// to the caller. Only two frames are held at a time, without copies.
//
// seg.Start and seg.End are set by Select from the queries and margin
// (which should be at least tol; a frame interval lets errors name the
// nearest frame).
func Select(ctx context.Context, d Decoder, seg Segment, queries []float64, tol, margin float64,
	put func(Match) error, miss func(q int, nearest float64) error) (handled int, err error) {
	if len(queries) == 0 {
		return 0, nil
	}
	seg.Start = queries[0] - margin
	seg.End = queries[len(queries)-1] + margin
	var prev Frame // its Pix stays valid during the next callback (Frame)
	havePrev := false
	qi := 0
	decide := func(next *Frame) error {
		q := queries[qi]
		best, dist := (*Frame)(nil), math.Inf(1)
		if havePrev {
			best, dist = &prev, math.Abs(q-prev.PTS)
		}
		if next != nil {
			if dn := math.Abs(next.PTS - q); dn < dist {
				best, dist = next, dn
			}
		}
		var err error
		switch {
		case best == nil:
			err = miss(qi, math.NaN())
		case dist < tol:
			err = put(Match{Query: qi, Frame: *best})
		default:
			err = miss(qi, best.PTS)
		}
		qi++
		return err
	}
	err = d.Decode(ctx, seg, func(f Frame) error {
		for qi < len(queries) && queries[qi] < f.PTS {
			if err := decide(&f); err != nil {
				return err
			}
		}
		if qi == len(queries) {
			return ErrStop
		}
		prev, havePrev = f, true
		return nil
	})
	if err != nil {
		return qi, err
	}
	for qi < len(queries) {
		if err := decide(nil); err != nil {
			return qi, err
		}
	}
	return qi, nil
}

// ToCHW writes f's HWC RGB pixels to dst (len 3×H×W) as CHW planes.
func ToCHW(dst []byte, f Frame) {
	n := f.Width * f.Height
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	pix := f.Pix[:3*n]
	i := 0
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
