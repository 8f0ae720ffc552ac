package datagen

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/lrstream/lrstream/internal/procenv"
)

// DefaultVideoGOP is the keyframe interval LeRobot's video encoder writes
// (g=2).
const DefaultVideoGOP = 2

// videoCodecName is info.json's video.codec: the codec written, or
// "av1" (LeRobot's default) when no video is written.
func videoCodecName(o *Options) string {
	if o.Videos && o.VideoCodec == "h264" {
		return "h264"
	}
	return "av1"
}

// writeVideos writes, per data file and camera, an mp4 holding the file's
// frames at FPS (the episodes back to back, as the episodes index's
// from_timestamp says), by running ffmpeg on its testsrc2 pattern (a
// moving image with a frame counter; each camera's hue differs).
// Missing ffmpeg is an error saying how to install it.
func (p *plan) writeVideos(ctx context.Context, root string) error {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		return fmt.Errorf("datagen: --videos needs FFmpeg (install it, e.g. `apt-get install ffmpeg`): %w", err)
	}
	o := &p.o
	for _, f := range p.files {
		for ci, cam := range o.Cameras {
			rel := fmt.Sprintf("videos/%s/chunk-%03d/file-%03d.mp4", cam, f.chunk, f.index)
			path := filepath.Join(root, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("datagen: %w", err)
			}
			src := fmt.Sprintf("testsrc2=size=%dx%d:rate=%d,hue=h=%d", o.VideoWidth, o.VideoHeight, o.FPS, 97*ci)
			args := []string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y",
				"-f", "lavfi", "-i", src, "-frames:v", strconv.FormatInt(f.rows, 10), "-pix_fmt", "yuv420p"}
			gop := strconv.Itoa(o.VideoGOP)
			switch o.VideoCodec {
			case "av1":
				args = append(args, "-c:v", "libsvtav1", "-g", gop, "-crf", "30", "-preset", "12", "-svtav1-params", "verbose=0")
			default:
				args = append(args, "-c:v", "libx264", "-g", gop, "-preset", "veryfast", "-crf", "23")
			}
			args = append(args, path)
			cmd := exec.CommandContext(ctx, ff, args...)
			cmd.Env = procenv.Child(os.Environ())
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("datagen: writing %s: ffmpeg: %v: %s", rel, err, out)
			}
		}
	}
	return nil
}
