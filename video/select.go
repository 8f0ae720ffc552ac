package video

import (
	"context"
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
	seg.Start, seg.End = querySpan(queries, margin)
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

// querySpan is the span Select decodes for queries (ascending, at least
// one) with margin.
func querySpan(queries []float64, margin float64) (start, end float64) {
	return queries[0] - margin, queries[len(queries)-1] + margin
}
