package validate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// cameraKinds checks depth features beyond what stream refuses
// (cameraShapes reports those: unusable quantization parameters, channel
// counts): parameters present (LeRobot's defaults otherwise), the pixel
// format info.json records able to hold 12-bit codes, AV1 (which
// LeRobotDataset 0.6.1 cannot open), a depth image's unit.
func (v *validator) cameraKinds() {
	var depth []string
	for _, f := range v.ds.Info.Features {
		if !f.IsVisual() {
			continue
		}
		col := f.Name
		if _, err := video.NewCamera(f, video.DepthMillimetres); err != nil {
			continue // cameraShapes reports it, with the reason
		}
		if !video.IsDepth(f) {
			continue
		}
		depth = append(depth, col)
		if f.DType == schema.DTypeImage {
			v.depthImage(f)
			continue
		}
		p, _ := video.DepthOf(f)
		if len(p.Missing) > 0 {
			v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: shard.InfoPath, Column: col,
				Message: fmt.Sprintf("depth map without %s in its info: read as LeRobot's defaults (depth_min %g, depth_max %g, shift %g, use_log %v), as LeRobotDataset does; if the recording used others every depth value is wrong",
					strings.Join(p.Missing, ", "), video.DefaultDepthMin, video.DefaultDepthMax, video.DefaultDepthShift, video.DefaultDepthLog)})
		}
		v.depthEncoding(f)
	}
	if len(depth) > 0 {
		v.checked("depth cameras (" + strings.Join(depth, ", ") + "): quantization parameters present and meaningful, one channel, a 12-bit pixel format in info.json")
	}
}

// depthEncoding checks the pixel format info.json records for a depth
// feature's video (video.pix_fmt; LeRobot writes gray12le).
func (v *validator) depthEncoding(f schema.Feature) {
	var info map[string]json.RawMessage
	_ = json.Unmarshal(f.Info, &info)
	var pf string
	if raw, ok := info["video.pix_fmt"]; ok {
		_ = json.Unmarshal(raw, &pf)
	}
	if pf == "" {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: shard.InfoPath, Column: f.Name,
			Message: "depth map without video.pix_fmt in its info: its 12-bit pixel format is checked only when its frames are decoded"})
		return
	}
	if err := video.CheckDepthPixFmt(pf); err != nil {
		v.c.add(Finding{Severity: Error, Check: CheckVideo, File: shard.InfoPath, Column: f.Name,
			Message: "depth map: " + err.Error()})
	}
	var codec string
	if raw, ok := info["video.codec"]; ok {
		_ = json.Unmarshal(raw, &codec)
	}
	if codec == "av1" {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: shard.InfoPath, Column: f.Name,
			Message: "depth map in AV1: lrstream decodes it, but LeRobotDataset 0.6.1 refuses to open the dataset (it maps the recorded codec av1 to libsvtav1, which has no gray12le)"})
	}
}

// depthImage checks a depth image feature: without info.depth_unit its
// values cannot be converted to the requested unit (LeRobot returns them
// as stored, and so does lrstream).
func (v *validator) depthImage(f schema.Feature) {
	var info map[string]json.RawMessage
	_ = json.Unmarshal(f.Info, &info)
	if raw, ok := info["depth_unit"]; !ok || string(raw) == "null" {
		v.c.add(Finding{Severity: Warning, Check: CheckVideo, File: shard.InfoPath, Column: f.Name,
			Message: "depth image without depth_unit in its info: its values are returned as stored, not converted to --depth-unit (as LeRobotDataset)"})
	}
}
