package video

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStreamInfo(t *testing.T) {
	good := `{"streams":[{"codec_type":"video","width":96,"height":64,"pix_fmt":"yuv420p","r_frame_rate":"30/1","avg_frame_rate":"30/1","time_base":"1/15360","start_time":"0.000000","duration":"2.000000","nb_frames":"60"}],"format":{"duration":"2.000000"}}`
	tests := []struct {
		name, out string
		want      StreamInfo
		err       string
	}{
		{"mp4", good, StreamInfo{Width: 96, Height: 64, PixFmt: "yuv420p", FrameRate: [2]int64{30, 1}, AvgFrameRate: [2]int64{30, 1},
			TimeBase: [2]int64{1, 15360}, Start: 0, Duration: 2, Frames: 60}, ""},
		{"no stream duration, no count", `{"streams":[{"codec_type":"video","width":2,"height":2,"r_frame_rate":"0/0","duration":"N/A"}],"format":{"duration":"1.5"}}`,
			StreamInfo{Width: 2, Height: 2, Start: math.NaN(), Duration: 1.5, Frames: -1}, ""},
		{"nothing known", `{"streams":[{}]}`, StreamInfo{Start: math.NaN(), Duration: math.NaN(), Frames: -1}, ""},
		{"audio only", `{"streams":[{"codec_type":"audio"}]}`, StreamInfo{}, "no video stream"},
		{"no stream", `{"streams":[]}`, StreamInfo{}, "no video stream"},
		{"not json", `moov atom not found`, StreamInfo{}, "ffprobe's report"},
		{"negative", `{"streams":[{"r_frame_rate":"-30/1","time_base":"1/-5","duration":"-1","nb_frames":"-3"}]}`,
			StreamInfo{Start: math.NaN(), Duration: math.NaN(), Frames: -1}, ""},
	}
	same := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
	for _, tc := range tests {
		got, err := parseStreamInfo([]byte(tc.out))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		g, w := got, tc.want
		if !same(g.Start, w.Start) || !same(g.Duration, w.Duration) {
			t.Errorf("%s: start %v duration %v, want %v %v", tc.name, g.Start, g.Duration, w.Start, w.Duration)
		}
		g.Start, g.Duration, w.Start, w.Duration = 0, 0, 0, 0
		if g != w {
			t.Errorf("%s: %+v, want %+v", tc.name, g, w)
		}
	}
}

func FuzzParseStreamInfo(f *testing.F) {
	f.Add([]byte(`{"streams":[{"codec_type":"video","width":96,"height":64,"r_frame_rate":"30/1","avg_frame_rate":"30/1","time_base":"1/15360","start_time":"0.0","duration":"2.0","nb_frames":"60"}],"format":{"duration":"2.0"}}`))
	f.Add([]byte(`{"streams":[{"r_frame_rate":"1/0","time_base":"9999999999999/1","duration":"1e400"}]}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		si, err := parseStreamInfo(out)
		if err != nil {
			return
		}
		for _, r := range [][2]int64{si.FrameRate, si.AvgFrameRate, si.TimeBase} {
			if (r[0] == 0) != (r[1] == 0) || r[0] < 0 || r[1] < 0 {
				t.Fatalf("fraction %v", r)
			}
		}
		if si.Duration < 0 || math.IsInf(si.Duration, 0) || si.Start < 0 || si.Frames < -1 {
			t.Fatalf("accepted %+v", si)
		}
		// Whatever it says, the check gives an answer without panicking.
		_ = CheckStream(si, FileNeeds{Width: 96, Height: 64, FPS: 30, End: 2}, 1e-4)
	})
}

// TestCheckStream: a file's stream against what its episodes need (issue
// 25 items 2 and 3).
func TestCheckStream(t *testing.T) {
	ok := StreamInfo{Width: 96, Height: 64, FrameRate: [2]int64{30, 1}, AvgFrameRate: [2]int64{30, 1}, TimeBase: [2]int64{1, 15360}, Start: 0, Duration: 2, Frames: 60}
	need := FileNeeds{Width: 96, Height: 64, FPS: 30, End: 2}
	tests := []struct {
		name string
		edit func(si *StreamInfo, n *FileNeeds)
		want string
	}{
		{"matches", func(*StreamInfo, *FileNeeds) {}, ""},
		{"longer than needed", func(si *StreamInfo, _ *FileNeeds) { si.Duration, si.Frames = 3, 90 }, ""},
		{"resized: any size", func(si *StreamInfo, n *FileNeeds) { si.Width = 640; n.Width, n.Height = 0, 0 }, ""},
		{"end within tolerance", func(_ *StreamInfo, n *FileNeeds) { n.End = 2.00005 }, ""},
		{"only avg rate matches", func(si *StreamInfo, _ *FileNeeds) { si.FrameRate = [2]int64{60, 1} }, ""},
		{"rates unknown", func(si *StreamInfo, _ *FileNeeds) { si.FrameRate, si.AvgFrameRate = [2]int64{}, [2]int64{} }, ""},
		{"no duration: frame count", func(si *StreamInfo, _ *FileNeeds) { si.Duration = math.NaN() }, ""},
		{"timestamps scaled x2", func(si *StreamInfo, _ *FileNeeds) {
			si.FrameRate, si.AvgFrameRate, si.Duration = [2]int64{15, 1}, [2]int64{1800, 119}, 3.966667
		}, "(r_frame_rate 15/1, avg_frame_rate 1800/119) is not info.json's fps 30"},
		{"one frame short", func(si *StreamInfo, _ *FileNeeds) { si.Duration, si.Frames = 1.966667, 59 }, "it is 1 frame(s) short"},
		{"a frame missing, the duration kept", func(si *StreamInfo, _ *FileNeeds) { si.Frames = 59 }, "the video has 59 frames, its episodes need 60"},
		{"duration without the last frame's, every frame there", func(si *StreamInfo, _ *FileNeeds) { si.Duration = 1.966667 }, ""},
		{"one frame short, count only", func(si *StreamInfo, _ *FileNeeds) { si.Duration, si.Frames = math.NaN(), 59 }, "the video has 59 frames, its episodes need 60"},
		{"one frame short, duration only", func(si *StreamInfo, _ *FileNeeds) { si.Duration, si.Frames = 1.966667, -1 }, "1 frame(s) short"},
		{"late start", func(si *StreamInfo, _ *FileNeeds) { si.Start, si.Duration, si.Frames = 0.1, 1.8, -1 }, "short"},
		{"length unknown", func(si *StreamInfo, _ *FileNeeds) { si.Duration, si.Frames = math.NaN(), -1 }, "neither the video's duration nor its frame count"},
		{"wrong size", func(si *StreamInfo, _ *FileNeeds) { si.Width, si.Height = 64, 48 }, "the video's frames are 64x48, info.json says 96x64"},
		{"coarse time base", func(si *StreamInfo, _ *FileNeeds) { si.TimeBase = [2]int64{1, 1000} }, "time base 1/1000 s cannot hold frames 1/30 s apart"},
		{"time base a multiple", func(si *StreamInfo, _ *FileNeeds) { si.TimeBase = [2]int64{1, 30} }, ""},
	}
	for _, tc := range tests {
		si, n := ok, need
		tc.edit(&si, &n)
		err := CheckStream(si, n, 1e-4)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestProbeStream: ffprobe's report of real files, and of a file whose
// timestamps are scaled.
func TestProbeStream(t *testing.T) {
	d := needFFmpeg(t)
	dir := t.TempDir()
	p := makeVideo(t, dir, "a.mp4", "libx264", 96, 64, 30, 60, 2)
	si, err := d.ProbeStream(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if si.Width != 96 || si.Height != 64 || si.FrameRate != [2]int64{30, 1} || si.Frames != 60 || math.Abs(si.Duration-2) > 1e-6 {
		t.Fatalf("%+v", si)
	}
	if err := CheckStream(si, FileNeeds{Width: 96, Height: 64, FPS: 30, End: 2}, 1e-4); err != nil {
		t.Fatal(err)
	}
	scaled := filepath.Join(dir, "scaled.mp4")
	if out, err := exec.Command(d.Path, "-nostdin", "-loglevel", "error", "-itsscale", "2", "-i", p, "-c", "copy", scaled).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	si, err = d.ProbeStream(context.Background(), scaled)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStream(si, FileNeeds{Width: 96, Height: 64, FPS: 30, End: 2}, 1e-4); err == nil || !strings.Contains(err.Error(), "frame rate") {
		t.Fatalf("scaled: %v (%+v)", err, si)
	}
	if _, err := (&FFmpeg{Path: d.Path}).ProbeStream(context.Background(), p); err == nil || !strings.Contains(err.Error(), "ffprobe not found") {
		t.Fatalf("without ffprobe: %v", err)
	}
}
