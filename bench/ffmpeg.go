package bench

import (
	"context"
	"fmt"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/video"
)

// ffmpegFloor decodes every video file of cfg's decoded cameras with
// FFmpeg alone — the build the stream uses (video.NewFFmpeg) — (ffmpeg -i
// FILE -f null -: decode, no conversion, no output), one file after the
// other (FFmpeg threads each decode itself), and returns the camera
// frames the episodes index gives for them.
func ffmpegFloor(ctx context.Context, cfg *pipeline.Config) (int64, error) {
	ff, err := video.NewFFmpeg()
	if err != nil {
		return 0, fmt.Errorf("ffmpeg stage: %w", err)
	}
	files, frames, err := cfg.Cameras.Files(nil)
	if err != nil {
		return 0, err
	}
	for _, name := range files {
		path, release, err := cfg.Cameras.Locate(ctx, name)
		if err != nil {
			return 0, err
		}
		out, err := video.Command(ctx, ff.Path, "-nostdin", "-hide_banner", "-loglevel", "error",
			"-i", path, "-map", "0:v:0", "-f", "null", "-").CombinedOutput()
		release()
		if err != nil {
			return 0, fmt.Errorf("ffmpeg stage: %s: %v: %s", name, err, out)
		}
	}
	return frames, nil
}
