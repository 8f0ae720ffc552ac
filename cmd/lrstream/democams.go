package main

import (
	"context"
	"errors"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/video"
)

// demoNoFFmpeg is the reason the embedded demo's cameras are not decoded
// on a machine without FFmpeg (sink.Camera.Reason, and the camera note).
const demoNoFFmpeg = "FFmpeg not found (install it to see the demo's camera frames, e.g. `apt-get install ffmpeg`)"

// setupCameras is pipeline.SetupCameras, except for the embedded demo
// (demo) under the default --cameras auto on a machine without FFmpeg: a
// newcomer's first command then streams the demo without its camera
// frames, the camera note saying why, instead of failing. Any other
// dataset, or an explicit --cameras, still needs FFmpeg to decode cameras.
func setupCameras(ctx context.Context, cfg *pipeline.Config, co pipeline.CameraOptions, demo bool) error {
	noFFmpeg := false
	if demo && (co.Spec == "" || co.Spec == video.ModeAuto) && co.NewDecoder == nil {
		_, err := video.NewFFmpeg()
		noFFmpeg = errors.Is(err, video.ErrNoFFmpeg)
	}
	if !noFFmpeg {
		return pipeline.SetupCameras(ctx, cfg, co)
	}
	co.Spec = video.ModeNone
	if err := pipeline.SetupCameras(ctx, cfg, co); err != nil {
		return err
	}
	for i := range cfg.CameraStatus {
		cfg.CameraStatus[i].Reason = demoNoFFmpeg
	}
	return nil
}
