package video

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/lrstream/lrstream/schema"
)

// Depth cameras: LeRobot (0.6.1) records a depth camera as a video feature
// whose "info" says "is_depth_map": true (legacy: "video.is_depth_map" in
// "info" or "video_info"). Its frames are 12-bit codes (gray12le, HEVC
// lossless by default), quantized between info's "video.depth_min" and
// "video.depth_max" (metres), logarithmically with "video.shift" or
// linearly ("video.use_log"); LeRobotDataset dequantizes them on read
// (depth_utils.dequantize_depth) to float32 (1, H, W) millimetres (default)
// or metres (depth_output_unit).

// Depth units of --depth-unit (LeRobotDataset's depth_output_unit).
const (
	DepthMillimetres = "mm"
	DepthMetres      = "m"
)

// LeRobot's DepthEncoderConfig defaults: a parameter absent from info is
// read as these, as LeRobot does.
const (
	DefaultDepthMin   = 0.01
	DefaultDepthMax   = 10.0
	DefaultDepthShift = 3.5
	DefaultDepthLog   = true
	// depthQMax is the largest 12-bit code (DEPTH_QMAX).
	depthQMax = 4095
)

// DepthParams are a depth feature's quantization parameters (metres).
type DepthParams struct {
	Min, Max, Shift float64
	Log             bool
	// Missing lists the parameters info lacks (read as LeRobot's
	// defaults), for validate's warning.
	Missing []string
}

// depthInfoKeys are the info keys of the parameters, in DepthParams order.
var depthInfoKeys = [...]string{"video.depth_min", "video.depth_max", "video.shift", "video.use_log"}

// IsDepth reports whether f is a depth map, as LeRobotDatasetMetadata's
// depth_keys decides (a truthy "is_depth_map" or "video.is_depth_map" in
// info, or "video.is_depth_map" in video_info). Malformed info objects are
// not depth maps here; DepthOf reports them.
func IsDepth(f schema.Feature) bool {
	info, _ := jsonObject(f.Info)
	vinfo, _ := jsonObject(f.VideoInfo)
	return truthy(info["is_depth_map"]) || truthy(info["video.is_depth_map"]) || truthy(vinfo["video.is_depth_map"])
}

// DepthOf returns the quantization parameters of a depth feature (nil for
// a feature that is not a depth map), or an error naming the feature and
// the parameter for parameters LeRobot could not use or that are not
// meaningful: not numbers, not finite, depth_min >= depth_max, or
// depth_min + shift <= 0 with log quantization.
func DepthOf(f schema.Feature) (*DepthParams, error) {
	info, err := jsonObject(f.Info)
	if err != nil {
		return nil, fmt.Errorf("camera %s: info: %w", f.Name, err)
	}
	if _, err := jsonObject(f.VideoInfo); err != nil {
		return nil, fmt.Errorf("camera %s: video_info: %w", f.Name, err)
	}
	if !IsDepth(f) {
		return nil, nil
	}
	p := &DepthParams{Min: DefaultDepthMin, Max: DefaultDepthMax, Shift: DefaultDepthShift, Log: DefaultDepthLog}
	nums := []*float64{&p.Min, &p.Max, &p.Shift}
	for i, k := range depthInfoKeys {
		raw, ok := info[k]
		if !ok || isNull(raw) {
			p.Missing = append(p.Missing, k)
			continue
		}
		if i == 3 {
			if err := json.Unmarshal(raw, &p.Log); err != nil {
				return nil, fmt.Errorf("camera %s: meta/info.json info %q is %s, want true or false", f.Name, k, raw)
			}
			continue
		}
		if err := json.Unmarshal(raw, nums[i]); err != nil {
			return nil, fmt.Errorf("camera %s: meta/info.json info %q is %s, want a number (metres)", f.Name, k, raw)
		}
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("camera %s: meta/info.json depth quantization: %w", f.Name, err)
	}
	return p, nil
}

// maxDepthParam bounds the parameters (metres): far beyond any sensor, and
// small enough that the float32 arithmetic of the table stays finite.
const maxDepthParam = 1e9

// check refuses parameters that cannot be dequantized meaningfully.
func (p *DepthParams) check() error {
	for i, v := range []float64{p.Min, p.Max, p.Shift} {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > maxDepthParam {
			return fmt.Errorf("%s is %v: want a finite depth in metres, |x| <= %g", depthInfoKeys[i], v, float64(maxDepthParam))
		}
	}
	if !(p.Min < p.Max) {
		return fmt.Errorf("video.depth_min %v is not below video.depth_max %v", p.Min, p.Max)
	}
	if p.Log && !(p.Min+p.Shift > 0) {
		// LeRobot raises the same (_validate_log_quant_params).
		return fmt.Errorf("depth_min + shift must be positive for logarithmic quantization, got depth_min=%v + shift=%v", p.Min, p.Shift)
	}
	return nil
}

// DepthTable maps every 16-bit code to its dequantized float32 value.
type DepthTable struct {
	lut []float32 // 65536 entries: any code a decoder can give
}

// Table returns the dequantization table of p in unit ("mm" or "m").
//
// The arithmetic is LeRobot's dequantize_depth on a torch tensor, step by
// step in float32 as torch runs it: scale and offset computed in float64
// from the parameters (Python floats), then code·scale + offset, exp and
// − shift (log), clamp to [depth_min, depth_max], and for millimetres ×1000,
// round half to even, clamp to [0, 65535]; each scalar enters as float32.
// exp is float64's exp rounded to float32 (correctly rounded). torch's
// float32 exp on x86 is MKL's vsExp (the wheels are built with MKL; SLEEF
// elsewhere), accurate to one ulp but not correctly rounded and not
// reproducible without MKL: with log quantization in metres about 1% of
// the codes come out one ulp apart from LeRobot's (at most 4.8e-7 m
// between 4 and 8 m); in millimetres (rounded to whole mm) and with linear
// quantization the values are LeRobot's bit for bit
// (python/interop/test_lerobot_depth.py, every frame, every code).
func (p *DepthParams) Table(unit string) (*DepthTable, error) {
	if unit != DepthMillimetres && unit != DepthMetres {
		return nil, fmt.Errorf("depth unit %q: want mm or m", unit)
	}
	var scale, offset float64
	if p.Log {
		logMin, logMax := math.Log(p.Min+p.Shift), math.Log(p.Max+p.Shift)
		scale, offset = (logMax-logMin)/depthQMax, logMin
	} else {
		scale, offset = (p.Max-p.Min)/depthQMax, p.Min
	}
	s32, o32, sh32 := float32(scale), float32(offset), float32(p.Shift)
	lo, hi := float32(p.Min), float32(p.Max)
	t := &DepthTable{lut: make([]float32, 1<<16)}
	for c := range t.lut {
		v := float32(float32(c) * s32)
		v = float32(v + o32)
		if p.Log {
			v = float32(math.Exp(float64(v)))
			v = float32(v - sh32)
		}
		v = min(max(v, lo), hi)
		if unit == DepthMillimetres {
			v = float32(v * 1000)
			v = float32(math.RoundToEven(float64(v)))
			v = min(max(v, 0), 65535)
		}
		t.lut[c] = v
	}
	return t, nil
}

// Value returns code's dequantized value.
func (t *DepthTable) Value(code uint16) float32 { return t.lut[code] }

// Fill writes a gray12le frame (sw×sh little-endian 16-bit codes) to dst
// as dw×dh float32 values (little-endian), dequantized; when the sizes
// differ the frame is resized by nearest neighbour: output pixel (y, x)
// takes source pixel (⌊y·sh/dh⌋, ⌊x·sw/dw⌋) — depth values are never
// blended (a blend of a near and a far surface is a depth nothing is at).
func (t *DepthTable) Fill(dst, pix []byte, sw, sh, dw, dh int) {
	lut := (*[1 << 16]float32)(t.lut) // indexed by a uint16: no bounds checks
	if sw == dw && sh == dh {
		n := dw * dh
		pix, dst = pix[:2*n], dst[:4*n]
		for i := range n {
			p := pix[2*i : 2*i+2 : 2*i+2]
			binary.LittleEndian.PutUint32(dst[4*i:4*i+4:4*i+4], math.Float32bits(lut[uint16(p[0])|uint16(p[1])<<8]))
		}
		return
	}
	xs := make([]int, dw)
	for x := range xs {
		xs[x] = x * sw / dw
	}
	for y := range dh {
		row := pix[2*(y*sh/dh)*sw:]
		out := dst[4*y*dw:]
		for x, sx := range xs {
			binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(lut[binary.LittleEndian.Uint16(row[2*sx:])]))
		}
	}
}

// jsonObject parses a JSON object (nil or null: empty).
func jsonObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// truthy is Python's truth value of a JSON value (bool(x)).
func truthy(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false
}

// NewCamera returns the decoded camera of video or image feature f: a
// depth camera (IsDepth: one channel, dequantized to float32 in unit) or
// an RGB one (three channels, uint8). Anything else is an error naming the
// camera: a depth map declared with other than one channel, bad
// quantization parameters (DepthOf), other channel counts.
func NewCamera(f schema.Feature, unit string) (Camera, error) {
	c, h, w, err := FeatureShape(f)
	if err != nil {
		return Camera{}, err
	}
	cam := Camera{Key: f.Name, C: c, H: h, W: w}
	dp, err := DepthOf(f)
	if err != nil {
		return Camera{}, err
	}
	if dp == nil {
		if c != 3 {
			return Camera{}, fmt.Errorf("camera %s: %d channels and not a depth map (info.is_depth_map); lrstream decodes RGB (3 channels) and depth (1 channel) cameras", f.Name, c)
		}
		return cam, nil
	}
	if c != 1 {
		return Camera{}, fmt.Errorf("camera %s: declared a depth map (meta/info.json info.is_depth_map) but its shape %v has %d channels, want 1", f.Name, f.Shape, c)
	}
	if f.DType == schema.DTypeImage {
		stored, err := depthUnitOf(f)
		if err != nil {
			return Camera{}, err
		}
		if unit != DepthMillimetres && unit != DepthMetres {
			return Camera{}, fmt.Errorf("camera %s: depth unit %q: want mm or m", f.Name, unit)
		}
		cam.img = &imageDepth{stored: stored, out: unit}
		cam.DepthUnit = cam.img.unit()
		return cam, nil
	}
	if cam.Depth, err = dp.Table(unit); err != nil {
		return Camera{}, fmt.Errorf("camera %s: %w", f.Name, err)
	}
	cam.DepthUnit, cam.depth = unit, dp
	return cam, nil
}

// SetDepthUnit makes every depth camera of s give its values in unit
// ("mm", LeRobot's default, or "m").
func (s *Set) SetDepthUnit(unit string) error {
	for i := range s.Cameras {
		c := &s.Cameras[i]
		if c.depth == nil {
			continue
		}
		t, err := c.depth.Table(unit)
		if err != nil {
			return err
		}
		c.Depth, c.DepthUnit = t, unit
	}
	return nil
}

// putFrame writes decoded frame f to dst as camera c's CHW values.
func putFrame(dst []byte, c Camera, f Frame) error {
	if c.Depth == nil {
		if f.Gray12 {
			return fmt.Errorf("a gray12le frame for an RGB camera")
		}
		ToCHW(dst, f)
		return nil
	}
	if !f.Gray12 {
		return fmt.Errorf("depth camera: the decoder gave a frame that is not gray12le")
	}
	c.Depth.Fill(dst, f.Pix, f.Width, f.Height, c.W, c.H)
	return nil
}

// depthUnitOf returns a depth image feature's info["depth_unit"] ("" when
// absent or null: LeRobot returns such values as stored).
func depthUnitOf(f schema.Feature) (string, error) {
	info, _ := jsonObject(f.Info)
	raw, ok := info["depth_unit"]
	if !ok || isNull(raw) {
		return "", nil
	}
	var u string
	if json.Unmarshal(raw, &u) != nil || (u != DepthMillimetres && u != DepthMetres) {
		return "", fmt.Errorf("camera %s: info \"depth_unit\" is %s, want \"mm\" or \"m\"", f.Name, raw)
	}
	return u, nil
}

// decodeDepthImage decodes a depth image feature's TIFF into dst (c's
// float32 frame), resized by nearest neighbour when resize is set.
func decodeDepthImage(b []byte, c Camera, resize bool, dst []byte) error {
	w, h, vals, err := decodeDepthTIFF(b)
	if err != nil {
		return err
	}
	if (w != c.W || h != c.H) && !resize {
		return fmt.Errorf("depth image is %dx%d, info.json says %dx%d (use --resize HxW to resize)", w, h, c.W, c.H)
	}
	for y := range c.H {
		row := vals[(y*h/c.H)*w:]
		out := dst[4*y*c.W:]
		for x := range c.W {
			binary.LittleEndian.PutUint32(out[4*x:], math.Float32bits(c.img.convert(row[x*w/c.W])))
		}
	}
	return nil
}
