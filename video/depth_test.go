package video

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

func depthFeature(info, vinfo string, shape ...int) schema.Feature {
	if len(shape) == 0 {
		shape = []int{4, 6, 1}
	}
	f := schema.Feature{Name: "observation.images.depth", DType: schema.DTypeVideo, Shape: shape,
		Names: json.RawMessage(`["height","width","channels"]`)}
	if info != "" {
		f.Info = json.RawMessage(info)
	}
	if vinfo != "" {
		f.VideoInfo = json.RawMessage(vinfo)
	}
	return f
}

func TestDepthOf(t *testing.T) {
	full := `{"is_depth_map":true,"video.depth_min":0.2,"video.depth_max":4,"video.shift":0.5,"video.use_log":false}`
	cases := []struct {
		name, info, vinfo string
		want              *DepthParams // nil: not depth
		missing           int
		err               string
	}{
		{name: "rgb", info: `{"is_depth_map":false,"video.pix_fmt":"yuv420p"}`},
		{name: "no info"},
		{name: "null info", info: `null`},
		{name: "full", info: full, want: &DepthParams{Min: 0.2, Max: 4, Shift: 0.5, Log: false}},
		{name: "defaults", info: `{"is_depth_map":true}`, want: &DepthParams{Min: 0.01, Max: 10, Shift: 3.5, Log: true}, missing: 4},
		{name: "null values are defaults", info: `{"is_depth_map":1,"video.depth_min":null}`, want: &DepthParams{Min: 0.01, Max: 10, Shift: 3.5, Log: true}, missing: 4},
		{name: "legacy key in info", info: `{"video.is_depth_map":true,"video.depth_max":2}`, want: &DepthParams{Min: 0.01, Max: 2, Shift: 3.5, Log: true}, missing: 3},
		{name: "legacy video_info", vinfo: `{"video.is_depth_map":true}`, want: &DepthParams{Min: 0.01, Max: 10, Shift: 3.5, Log: true}, missing: 4},
		{name: "min not below max", info: `{"is_depth_map":true,"video.depth_min":3,"video.depth_max":3}`, err: "is not below"},
		{name: "log min+shift", info: `{"is_depth_map":true,"video.depth_min":0.1,"video.shift":-0.1}`, err: "must be positive"},
		{name: "linear ignores shift", info: `{"is_depth_map":true,"video.depth_min":0.1,"video.shift":-5,"video.use_log":false}`, want: &DepthParams{Min: 0.1, Max: 10, Shift: -5}, missing: 1},
		{name: "string", info: `{"is_depth_map":true,"video.depth_min":"near"}`, err: "want a number"},
		{name: "bad use_log", info: `{"is_depth_map":true,"video.use_log":"yes"}`, err: "want true or false"},
		{name: "info not an object", info: `[1]`, err: "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := DepthOf(depthFeature(c.info, c.vinfo))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "observation.images.depth") {
					t.Fatalf("err %v, want %q naming the camera", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p == nil) != (c.want == nil) {
				t.Fatalf("got %+v, want %+v", p, c.want)
			}
			if p == nil {
				return
			}
			if p.Min != c.want.Min || p.Max != c.want.Max || p.Shift != c.want.Shift || p.Log != c.want.Log || len(p.Missing) != c.missing {
				t.Fatalf("got %+v, want %+v with %d missing", p, c.want, c.missing)
			}
		})
	}
}

func TestNewCameraKinds(t *testing.T) {
	depth := `{"is_depth_map":true}`
	cases := []struct {
		name string
		f    schema.Feature
		kind string
		err  string
	}{
		{"depth", depthFeature(depth, ""), KindDepth, ""},
		{"rgb", depthFeature("", "", 4, 6, 3), KindRGB, ""},
		{"3-channel depth", depthFeature(depth, "", 4, 6, 3), "", "has 3 channels, want 1"},
		{"1-channel not depth", depthFeature("", ""), "", "not a depth map"},
		{"depth image", func() schema.Feature { f := depthFeature(depth, ""); f.DType = schema.DTypeImage; return f }(), KindDepth, ""},
		{"depth image, bad unit", func() schema.Feature {
			f := depthFeature(`{"is_depth_map":true,"depth_unit":"cm"}`, "")
			f.DType = schema.DTypeImage
			return f
		}(), "", `want "mm" or "m"`},
	}
	for _, c := range cases {
		cam, err := NewCamera(c.f, DepthMillimetres)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || cam.Kind() != c.kind {
			t.Errorf("%s: %v kind %q, want %q", c.name, err, cam.Kind(), c.kind)
		}
	}
	cam, _ := NewCamera(depthFeature(depth, ""), DepthMetres)
	if cam.DType() != "<f4" || cam.FrameBytes() != 4*4*6 || cam.DepthUnit != "m" {
		t.Errorf("depth camera: %s, %d bytes, unit %q", cam.DType(), cam.FrameBytes(), cam.DepthUnit)
	}
	if _, err := (&DepthParams{Min: 0.1, Max: 1}).Table("cm"); err == nil {
		t.Error("unit cm: no error")
	}
}

// TestDepthTable checks the formula's landmarks (code 0 is depth_min, code
// 4095 depth_max, both units) and monotonicity; exactness against LeRobot
// is python/interop/test_lerobot_depth.py's.
func TestDepthTable(t *testing.T) {
	for _, p := range []DepthParams{{Min: 0.01, Max: 10, Shift: 3.5, Log: true}, {Min: 0.2, Max: 4}} {
		for _, unit := range []string{DepthMillimetres, DepthMetres} {
			tab, err := p.Table(unit)
			if err != nil {
				t.Fatal(err)
			}
			k := float32(1)
			if unit == DepthMillimetres {
				k = 1000
			}
			lo, hi := tab.Value(0), tab.Value(depthQMax)
			if math.Abs(float64(lo-float32(p.Min)*k)) > 1e-3*float64(k) || math.Abs(float64(hi-float32(p.Max)*k)) > 1e-3*float64(k) {
				t.Errorf("%+v %s: codes 0, 4095 -> %v, %v", p, unit, lo, hi)
			}
			for c := 1; c < 1<<16; c++ {
				if tab.lut[c] < tab.lut[c-1] {
					t.Fatalf("%+v %s: not monotonic at %d", p, unit, c)
				}
			}
			if tab.Value(65535) != hi {
				t.Errorf("codes above 4095 are clamped to depth_max: %v", tab.Value(65535))
			}
			if unit == DepthMillimetres && tab.Value(1234) != float32(math.Round(float64(tab.Value(1234)))) {
				t.Errorf("mm not whole: %v", tab.Value(1234))
			}
		}
	}
}

func TestDepthFillNearest(t *testing.T) {
	tab, _ := (&DepthParams{Min: 0, Max: 4095, Log: false}).Table(DepthMetres) // value = code
	sw, sh := 5, 3
	pix := make([]byte, 2*sw*sh)
	for i := range sw * sh {
		binary.LittleEndian.PutUint16(pix[2*i:], uint16(i))
	}
	at := func(dst []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(dst[4*i:])) }
	same := make([]byte, 4*sw*sh)
	tab.Fill(same, pix, sw, sh, sw, sh)
	for i := range sw * sh {
		if at(same, i) != float32(i) {
			t.Fatalf("pixel %d: %v", i, at(same, i))
		}
	}
	for _, d := range [][2]int{{2, 2}, {7, 4}, {5, 1}, {1, 6}} {
		dw, dh := d[0], d[1]
		dst := make([]byte, 4*dw*dh)
		tab.Fill(dst, pix, sw, sh, dw, dh)
		for y := range dh {
			for x := range dw {
				want := float32((y*sh/dh)*sw + x*sw/dw)
				if got := at(dst, y*dw+x); got != want {
					t.Fatalf("%dx%d (%d,%d): %v, want %v", dw, dh, y, x, got, want)
				}
			}
		}
	}
}

func TestCheckDepthPixFmt(t *testing.T) {
	for pf, ok := range map[string]bool{"gray12le": true, "gray12be": true, "gray16le": true, "yuv420p12le": true,
		"yuv444p16le": true, "gray": false, "gray10le": false, "yuv420p": false, "rgb24": false, "": false, "yuv420p10le": false} {
		if err := CheckDepthPixFmt(pf); (err == nil) != ok {
			t.Errorf("%q: %v", pf, err)
		}
	}
}

// FuzzDepthOf: any info JSON gives parameters that check() accepts, nil,
// or an error; never a panic, never a table with NaN.
func FuzzDepthOf(f *testing.F) {
	for _, s := range []string{`{"is_depth_map":true}`, `{"is_depth_map":true,"video.depth_min":0.2,"video.depth_max":4,"video.use_log":false}`,
		`{"video.is_depth_map":1,"video.shift":-1}`, `{"is_depth_map":true,"video.depth_min":1e308,"video.depth_max":1.7e308}`, `null`, `[]`, `{"is_depth_map":"x","video.depth_max":-0}`, `{"is_depth_map":true,"video.depth_min":-1e308,"video.depth_max":1e308,"video.use_log":false}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, info string) {
		p, err := DepthOf(depthFeature(info, ""))
		if err != nil || p == nil {
			return
		}
		if p.check() != nil {
			t.Fatalf("%s: accepted %+v", info, p)
		}
		for _, unit := range []string{DepthMillimetres, DepthMetres} {
			tab, err := p.Table(unit)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []uint16{0, 1, 2047, 4095, 65535} {
				if v := tab.Value(c); v != v {
					t.Fatalf("%s: code %d is NaN", info, c)
				}
			}
		}
	})
}

// BenchmarkDepthFill: one 480×640 gray12le frame dequantized to float32.
func BenchmarkDepthFill(b *testing.B) {
	tab, _ := (&DepthParams{Min: 0.01, Max: 10, Shift: 3.5, Log: true}).Table(DepthMillimetres)
	w, h := 640, 480
	pix := make([]byte, 2*w*h)
	for i := range w * h {
		binary.LittleEndian.PutUint16(pix[2*i:], uint16(i%4096))
	}
	dst := make([]byte, 4*w*h)
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		tab.Fill(dst, pix, w, h, w, h)
	}
}
