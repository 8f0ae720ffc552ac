package video

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestStoredFrameConverts stores frames of every form a decoder gives
// (storeFrame, as FillStored does) and checks that the conversion makes
// exactly the bytes putFrame writes when the frame is decoded (as Fill
// does), that a frame whose stored form would not fit is converted at
// once, that frames of one form share a conversion, and that the checks
// of putFrame are kept.
func TestStoredFrameConverts(t *testing.T) {
	pattern := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i/5)
		}
		return b
	}
	gray := func(n int) []byte { // little-endian codes 0..4095
		b := make([]byte, 2*n)
		for i := range n {
			v := (i * 37) % 4096
			b[2*i], b[2*i+1] = byte(v), byte(v>>8)
		}
		return b
	}
	tab, err := (&DepthParams{Min: 0.01, Max: 10, Shift: 3.5, Log: true}).Table(DepthMillimetres)
	if err != nil {
		t.Fatal(err)
	}
	rgb := func(w, h int) Camera { return Camera{Key: "rgb", C: 3, H: h, W: w} }
	depth := func(w, h int) Camera { return Camera{Key: "depth", C: 1, H: h, W: w, Depth: tab} }
	bt601, bt709 := yuvByName("bt601 limited"), yuvByName("bt709 limited")
	tests := []struct {
		name    string
		cam     Camera
		frame   Frame
		stored  int    // stored bytes (0: converted at once)
		wantErr string // putFrame's error, kept
	}{
		{"yuv bt601", rgb(48, 32), Frame{Width: 48, Height: 32, YUV: bt601, Pix: pattern(yuvSize(48, 32))}, yuvSize(48, 32), ""},
		{"yuv bt709 640x480", rgb(640, 480), Frame{Width: 640, Height: 480, YUV: bt709, Pix: pattern(yuvSize(640, 480))}, yuvSize(640, 480), ""},
		{"yuv, odd row length", rgb(18, 6), Frame{Width: 18, Height: 6, YUV: bt601, Pix: pattern(yuvSize(18, 6))}, yuvSize(18, 6), ""},
		{"rgb24", rgb(17, 3), Frame{Width: 17, Height: 3, Pix: pattern(3 * 17 * 3)}, 3 * 17 * 3, ""},
		{"rgb24 640x480", rgb(640, 480), Frame{Width: 640, Height: 480, Pix: pattern(3 * 640 * 480)}, 3 * 640 * 480, ""},
		{"depth", depth(20, 10), Frame{Width: 20, Height: 10, Gray12: true, Pix: gray(200)}, 400, ""},
		{"depth resized down: does not fit", depth(4, 3), Frame{Width: 20, Height: 10, Gray12: true, Pix: gray(200)}, 0, ""},
		{"depth resized up", depth(30, 12), Frame{Width: 20, Height: 10, Gray12: true, Pix: gray(200)}, 400, ""},
		{"gray for rgb", rgb(4, 2), Frame{Width: 4, Height: 2, Gray12: true, Pix: gray(8)}, 0, "gray12le frame for an RGB camera"},
		{"rgb for depth", depth(4, 2), Frame{Width: 4, Height: 2, Pix: pattern(24)}, 0, "not gray12le"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fb := tc.cam.FrameBytes()
			want := make([]byte, fb)
			werr := putFrame(want, tc.cam, tc.frame)
			slot := bytes.Repeat([]byte{0xee}, fb) // a reused buffer's old bytes
			conv, err := storeFrame(slot, tc.cam, tc.frame, nil)
			if tc.wantErr != "" {
				if err == nil || werr == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("storeFrame error %v, putFrame's %v; want %q", err, werr, tc.wantErr)
				}
				return
			}
			if err != nil || werr != nil {
				t.Fatalf("storeFrame: %v, putFrame: %v", err, werr)
			}
			got := slot
			if tc.stored == 0 {
				if conv != nil {
					t.Fatalf("stored as %v, want converted at once", conv)
				}
			} else {
				if conv == nil {
					t.Fatal("converted at once, want stored")
				}
				if src, dst := conv.Sizes(); src != tc.stored || dst != fb {
					t.Fatalf("%v: sizes %d, %d; want %d, %d", conv, src, dst, tc.stored, fb)
				}
				got = bytes.Repeat([]byte{0xdd}, fb)
				conv.Convert(got, slot[:tc.stored])
				if again, _ := storeFrame(make([]byte, fb), tc.cam, tc.frame, conv); again != conv {
					t.Fatal("a frame of the same form got a conversion of its own")
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the stored frame converts to other bytes than the decoded one")
			}
		})
	}
}

// TestFillStoredMatchesFill decodes samples of a real video (FFmpeg: YUV
// frames, converted in Go) with Fill and with FillStored, and checks that
// every sample's converted stored frame is the frame Fill wrote, and that
// a sample with no frame within tolerance fails the same way in both
// (zeroed, no conversion).
func TestFillStoredMatchesFill(t *testing.T) {
	d := needFFmpeg(t)
	var located atomic.Int32
	set, _ := twoCameraSet(t, &preparer{Decoder: d}, &located)
	defer set.Release()
	eps := []int64{0, 0, 0, 0}
	idx := []int64{0, 3, 4, 9}
	ts := []float32{0, 3.0 / 30, 0.5 / 30, 9.0 / 30} // the third: no frame within tolerance
	fb := set.Cameras[0].FrameBytes()
	want := make([]byte, len(eps)*fb)
	var wantFail []int
	if err := set.Fill(context.Background(), 0, eps, idx, ts, want, func(i int, err error) { wantFail = append(wantFail, i) }, nil); err != nil {
		t.Fatal(err)
	}
	stored := bytes.Repeat([]byte{0xee}, len(eps)*fb)
	convs := make([]*FrameConv, len(eps))
	var failed []int
	if err := set.FillStored(context.Background(), 0, eps, idx, ts, stored, convs, func(i int, err error) { failed = append(failed, i) }, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(failed, wantFail) || !slices.Equal(failed, []int{2}) {
		t.Fatalf("failed samples %v, Fill's %v; want [2]", failed, wantFail)
	}
	for i := range eps {
		slot, got := stored[i*fb:(i+1)*fb], stored[i*fb:(i+1)*fb]
		if c := convs[i]; c != nil {
			src, _ := c.Sizes()
			got = make([]byte, fb)
			c.Convert(got, slot[:src])
		} else if i != 2 {
			t.Fatalf("sample %d: no conversion (YUV frames are stored)", i)
		}
		if !bytes.Equal(got, want[i*fb:(i+1)*fb]) {
			t.Fatalf("sample %d: the stored frame converts to other bytes than Fill's", i)
		}
	}
	if err := set.FillStored(context.Background(), 0, eps, idx, ts, stored, convs[:1], func(int, error) {}, nil); err == nil {
		t.Fatal("FillStored with too few conversions: no error")
	}
}
