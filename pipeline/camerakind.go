package pipeline

import (
	"fmt"
	"slices"

	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// depthUnit is o's depth unit (default millimetres, as LeRobotDataset).
func depthUnit(o CameraOptions) string {
	if o.DepthUnit == "" {
		return video.DepthMillimetres
	}
	return o.DepthUnit
}

// cameraKinds checks that lrstream can decode every camera ch decodes
// (video.NewCamera: RGB and depth video, RGB images). Under --cameras auto a
// camera it cannot decode (a depth image feature, a channel count it does
// not know, unusable depth quantization parameters) is left out: removed
// from ch.Decoded and returned with the reason (listed in the preview and
// CameraNote's line). Under all or a list it is an error naming it.
func cameraKinds(cfg *Config, o CameraOptions, ch *video.Choice) (map[string]string, error) {
	auto := o.Spec == "" || o.Spec == video.ModeAuto
	out := map[string]string{}
	for _, k := range ch.Decoded {
		f, _ := cfg.Dataset.Info.Feature(k)
		if _, err := video.NewCamera(f, depthUnit(o)); err != nil {
			if !auto {
				return nil, fmt.Errorf("--cameras %s: %w; leave it out with --cameras auto or a list without it", o.Spec, err)
			}
			out[k] = "cannot decode: " + err.Error()
		}
	}
	ch.Decoded = slices.DeleteFunc(ch.Decoded, func(k string) bool { return out[k] != "" })
	return out, nil
}

// cameraHeader is cfg.CameraStatus with each decoded camera's kind, dtype,
// per-sample shape and (depth) unit, for the header.
func cameraHeader(cfg *Config) []sink.Camera {
	if len(cfg.CameraStatus) == 0 {
		return nil
	}
	cams := map[string]video.Camera{}
	if cfg.Cameras != nil {
		for _, c := range cfg.Cameras.Cameras {
			cams[c.Key] = c
		}
	}
	if cfg.Images != nil {
		for _, c := range cfg.Images.Cameras {
			cams[c.Key] = c
		}
	}
	out := slices.Clone(cfg.CameraStatus)
	for i := range out {
		c, ok := cams[out[i].Key]
		if !ok || !out[i].Decoded {
			continue
		}
		out[i].Kind, out[i].DType, out[i].Shape = c.Kind(), c.DType(), []int{c.C, c.H, c.W}
		if c.Kind() == video.KindDepth {
			out[i].Unit = c.DepthUnit // "" for a depth image of unknown unit (as stored)
		}
	}
	return out
}
