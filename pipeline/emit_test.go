package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/video"
)

// TestDeltaCameraKeyNotDecoded: a camera key in --delta-timestamps of a
// stream that carries no frames of it names the real cause.
func TestDeltaCameraKeyNotDecoded(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{video.ModeNone, "not selected (--cameras)"},
		{video.ModeAuto, "video files absent"},
	} {
		cfg := demoConfig(t, render.ModeFallback)
		var err error
		if cfg.Deltas, err = ParseDeltaTimestamps("observation.images.front=-1/30,0"); err != nil {
			t.Fatal(err)
		}
		if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: tc.spec}); err != nil {
			t.Fatal(err)
		}
		err = CheckStart([]Mix{{Config: cfg, Weight: 1}}, StreamOptions{BatchSize: 4}, nil)
		if err == nil || !strings.Contains(err.Error(), "is a camera") || !strings.Contains(err.Error(), tc.want) ||
			strings.Contains(err.Error(), "numeric features") {
			t.Errorf("--cameras %s: %v", tc.spec, err)
		}
	}
}
