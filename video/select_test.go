package video

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
)

// fakeDecoder hands out frames at fixed timestamps; each frame's single
// pixel byte is its position.
type fakeDecoder struct {
	pts   []float64
	fail  error // returned after the frames
	segs  []Segment
	calls int
}

func (d *fakeDecoder) Decode(ctx context.Context, seg Segment, fn func(Frame) error) error {
	d.calls++
	d.segs = append(d.segs, seg)
	// Two alternating buffers, as the Frame contract allows: a consumer
	// holding a frame longer than allowed sees it overwritten.
	var bufs [2][3]byte
	k := 0
	for i, p := range d.pts {
		if p < seg.Start || p > seg.End {
			continue
		}
		k ^= 1
		bufs[k] = [3]byte{byte(i), 0, 0}
		if err := fn(Frame{PTS: p, Width: 1, Height: 1, Pix: bufs[k][:]}); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return d.fail
}

func TestSelect(t *testing.T) {
	fps30 := []float64{0, 1.0 / 30, 2.0 / 30, 3.0 / 30, 4.0 / 30}
	tests := []struct {
		name    string
		pts     []float64
		queries []float64
		tol     float64
		margin  float64
		fail    error
		want    []int // frame per query; -1 a miss
		nearest []float64
		wantErr bool
	}{
		{name: "exact", pts: fps30, queries: []float64{0, 1.0 / 30, 4.0 / 30}, tol: 1e-4, want: []int{0, 1, 4}},
		{name: "within tolerance both sides", pts: fps30, queries: []float64{1.0/30 - 5e-5, 2.0/30 + 5e-5}, tol: 1e-4, want: []int{1, 2}},
		{name: "between frames is a miss", pts: fps30, queries: []float64{0.05}, tol: 1e-4, want: []int{-1}, nearest: []float64{2.0 / 30}},
		{name: "after the last frame", pts: fps30, queries: []float64{4.0 / 30, 5.0 / 30}, tol: 1e-4, want: []int{4, -1}, nearest: []float64{0, 4.0 / 30}},
		{name: "repeated query", pts: fps30, queries: []float64{2.0 / 30, 2.0 / 30}, tol: 1e-4, want: []int{2, 2}},
		{name: "no frames", pts: nil, queries: []float64{0}, tol: 1e-4, want: []int{-1}, nearest: []float64{math.NaN()}},
		{name: "tie picks the earlier frame", pts: []float64{0, 1}, queries: []float64{0.5}, tol: 1, margin: 1, want: []int{0}},
		{name: "decode error after frames", pts: fps30, queries: []float64{0, 10}, tol: 1e-4, fail: errors.New("boom"), want: []int{0}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDecoder{pts: tc.pts, fail: tc.fail}
			got := make([]int, len(tc.queries))
			for i := range got {
				got[i] = -2
			}
			near := make([]float64, len(tc.queries))
			margin := tc.margin
			if margin == 0 {
				margin = 1.0 / 30
			}
			n, err := Select(context.Background(), d, Segment{Path: "x"}, tc.queries, tc.tol, margin,
				func(m Match) error { got[m.Query] = int(m.Frame.Pix[0]); return nil },
				func(q int, nearest float64) error { got[q] = -1; near[q] = nearest; return nil })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if d.calls != 1 {
				t.Fatalf("%d decodes, want one seek per segment", d.calls)
			}
			if n != len(tc.want) {
				t.Fatalf("handled %d queries, want %d", n, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i] != w {
					t.Errorf("query %d (%g): frame %d, want %d", i, tc.queries[i], got[i], w)
				}
				if w == -1 && tc.nearest != nil {
					if a, b := near[i], tc.nearest[i]; !(a == b || (math.IsNaN(a) && math.IsNaN(b))) {
						t.Errorf("query %d: nearest %g, want %g", i, a, b)
					}
				}
			}
		})
	}
}

func TestToCHWSizes(t *testing.T) {
	for _, wh := range [][2]int{{1, 1}, {3, 1}, {8, 1}, {9, 2}, {17, 3}, {640, 480}} {
		w, h := wh[0], wh[1]
		f := Frame{Width: w, Height: h, Pix: make([]byte, 3*w*h)}
		for i := range f.Pix {
			f.Pix[i] = byte(i*7 + i/3)
		}
		got := make([]byte, 3*w*h)
		ToCHW(got, f)
		n := w * h
		for p := 0; p < n; p++ {
			for c := 0; c < 3; c++ {
				if got[c*n+p] != f.Pix[3*p+c] {
					t.Fatalf("%dx%d: pixel %d channel %d: %d, want %d", w, h, p, c, got[c*n+p], f.Pix[3*p+c])
				}
			}
		}
	}
}

func BenchmarkToCHW(b *testing.B) {
	f := Frame{Width: 640, Height: 480, Pix: make([]byte, 3*640*480)}
	dst := make([]byte, len(f.Pix))
	b.SetBytes(int64(len(f.Pix)))
	for b.Loop() {
		ToCHW(dst, f)
	}
}

func TestToCHW(t *testing.T) {
	f := Frame{Width: 2, Height: 1, Pix: []byte{1, 2, 3, 4, 5, 6}}
	dst := make([]byte, 6)
	ToCHW(dst, f)
	if want := []byte{1, 4, 2, 5, 3, 6}; string(dst) != string(want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
}

// FuzzSelect: whatever the frame and query timestamps, every query is
// handed back exactly once, in order; an accepted frame is the nearest
// decoded one and within tolerance; a miss has no frame within tolerance.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4}, []byte{0, 2, 4}, uint8(1))
	f.Add([]byte{10, 20, 30}, []byte{15, 25}, uint8(5))
	f.Add([]byte{}, []byte{1}, uint8(1))
	f.Fuzz(func(t *testing.T, ptsB, qB []byte, tolB uint8) {
		if len(ptsB) > 64 || len(qB) > 64 || len(qB) == 0 {
			return
		}
		// Frames at increasing timestamps (cumulative), queries sorted.
		pts := make([]float64, len(ptsB))
		acc := 0.0
		for i, b := range ptsB {
			acc += float64(b%16+1) / 30
			pts[i] = acc
		}
		qs := make([]float64, len(qB))
		for i, b := range qB {
			qs[i] = float64(b) / 30
		}
		slices.Sort(qs)
		tol := float64(tolB%32+1) / 60
		d := &fakeDecoder{pts: pts}
		next := 0
		_, err := Select(context.Background(), d, Segment{Path: "x"}, qs, tol, tol,
			func(m Match) error {
				if m.Query != next {
					t.Fatalf("query %d handed back, want %d", m.Query, next)
				}
				next++
				q := qs[m.Query]
				if math.Abs(m.Frame.PTS-q) >= tol {
					t.Fatalf("query %g: frame at %g outside tolerance %g", q, m.Frame.PTS, tol)
				}
				for _, p := range pts {
					if math.Abs(p-q) < math.Abs(m.Frame.PTS-q) {
						t.Fatalf("query %g: frame at %g chosen, %g is nearer", q, m.Frame.PTS, p)
					}
				}
				return nil
			},
			func(qi int, nearest float64) error {
				if qi != next {
					t.Fatalf("query %d missed out of order, want %d", qi, next)
				}
				next++
				for _, p := range pts {
					if math.Abs(p-qs[qi]) < tol {
						t.Fatalf("query %g missed, frame at %g is within %g", qs[qi], p, tol)
					}
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if next != len(qs) {
			t.Fatalf("%d of %d queries handed back", next, len(qs))
		}
	})
}
