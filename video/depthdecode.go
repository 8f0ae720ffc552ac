package video

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// grayCheck refuses a depth camera's video whose samples have fewer than
// 12 bits (an 8-bit stream cannot hold LeRobot's 12-bit codes: converting
// it to gray12le would scale 8-bit values into codes that mean nothing) or
// that is not a one-channel (gray) or YUV stream. It asks ffprobe once per
// file; without ffprobe the check is skipped (the frames still come as
// gray12le).
func (d *FFmpeg) grayCheck(ctx context.Context, path string) error {
	if v, ok := d.grays.Load(path); ok {
		err, _ := v.(error)
		return err
	}
	if d.Probe == "" {
		return nil
	}
	out, err := Command(ctx, d.Probe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=pix_fmt", "-of", "json", path).Output()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ffprobe %s: %w", path, err)
	}
	err = CheckDepthPixFmt(parsePixFmt(out))
	if err != nil {
		err = fmt.Errorf("depth video: %w", err)
	}
	d.grays.Store(path, err)
	return err
}

// parsePixFmt reads the pixel format from ffprobe's JSON ("" if none).
func parsePixFmt(out []byte) string {
	var r struct {
		Streams []struct {
			PixFmt string `json:"pix_fmt"`
		} `json:"streams"`
	}
	if json.Unmarshal(out, &r) != nil || len(r.Streams) != 1 {
		return ""
	}
	return r.Streams[0].PixFmt
}

// CheckDepthPixFmt accepts the pixel formats a depth map's 12-bit codes
// survive in: gray12 (LeRobot's), gray at 14 or 16 bits, and 12- to
// 16-bit YUV (whose luma PyAV's to_ndarray("gray12le") takes, as FFmpeg
// does here).
func CheckDepthPixFmt(pf string) error {
	if pf == "" {
		return fmt.Errorf("no video stream pixel format (ffprobe)")
	}
	base := strings.TrimSuffix(strings.TrimSuffix(pf, "le"), "be")
	for _, bits := range []string{"12", "14", "16"} {
		if base == "gray"+bits {
			return nil
		}
		if strings.HasPrefix(base, "yuv") && strings.HasSuffix(base, "p"+bits) {
			return nil
		}
	}
	return fmt.Errorf("pixel format %s: a depth map needs 12-bit samples (LeRobot writes gray12le); an 8-bit or RGB stream cannot hold its codes", pf)
}
