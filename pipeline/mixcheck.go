package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lrstream/lrstream/video"
)

// mixRevision is a mixture header's revision: the datasets' revisions,
// comma-separated in --dataset order as the header's dataset names, or ""
// when none has one (local directories), as a single local dataset's
// header has.
func mixRevision(revs []string) string {
	for _, r := range revs {
		if r != "" {
			return strings.Join(revs, ",")
		}
	}
	return ""
}

// decodedCameras lists the cameras whose frames cfg's batches carry
// (videos, then image features), with their decoded shapes.
func decodedCameras(cfg *Config) []video.Camera {
	var out []video.Camera
	if cfg.Cameras != nil {
		out = append(out, cfg.Cameras.Cameras...)
	}
	if cfg.Images != nil {
		out = append(out, cfg.Images.Cameras...)
	}
	return out
}

// checkMixCameras refuses a mixture whose datasets decode different
// cameras (keys or frame shapes), naming both datasets and the cameras,
// and why a camera is not decoded: the batches of a stream all have the
// same columns (issue 24 item 5: it failed after the header).
func checkMixCameras(srcs []Mix) error {
	a := srcs[0].Config
	want := decodedCameras(a)
	for _, m := range srcs[1:] {
		b := m.Config
		got := decodedCameras(b)
		if slices.Equal(got, want) {
			continue
		}
		msg := fmt.Sprintf("datasets %s and %s cannot be mixed: they decode different cameras: %s vs %s",
			a.Dataset.ID, b.Dataset.ID, cameraList(want), cameraList(got))
		if why := undecodedWhy(a, got, want) + undecodedWhy(b, want, got); why != "" {
			msg += " (" + strings.TrimPrefix(why, "; ") + ")"
		}
		return errors.New(msg + "; pass --cameras with cameras every dataset decodes (or none), and --resize for frames of different sizes")
	}
	return nil
}

// cameraList is "[KEY CxHxW, ...]".
func cameraList(cs []video.Camera) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %dx%dx%d", c.Key, c.C, c.H, c.W))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// undecodedWhy says why cfg does not decode the cameras of other that it
// lacks in own: "; DATASET: KEY REASON".
func undecodedWhy(cfg *Config, other, own []video.Camera) string {
	var b strings.Builder
	for _, c := range other {
		if slices.ContainsFunc(own, func(o video.Camera) bool { return o.Key == c.Key }) {
			continue
		}
		why := "has no such camera"
		for _, st := range cfg.CameraStatus {
			if st.Key == c.Key && st.Reason != "" {
				why = "not decoded: " + st.Reason
			}
		}
		fmt.Fprintf(&b, "; %s: %s %s", cfg.Dataset.ID, c.Key, why)
	}
	return b.String()
}
