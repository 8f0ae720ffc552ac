package video

import (
	"bytes"
	"context"
	"fmt"
)

// DecoderIdentity is implemented by decoders whose frames may differ from
// one build to another (FFmpeg's scaler): Identity names the build, so a
// frame cache keeps the frames of different builds apart.
type DecoderIdentity interface {
	Identity(ctx context.Context) (string, error)
}

// Identity names this FFmpeg build: `ffmpeg -version`'s lines naming the
// program and its libraries (libavcodec, libswscale, …), which change
// when any of them is upgraded. It runs ffmpeg once.
func (d *FFmpeg) Identity(context.Context) (string, error) {
	d.idOnce.Do(func() {
		cmd := command(d.Path, "-hide_banner", "-version")
		out, err := cmd.Output()
		if err != nil {
			d.idErr = fmt.Errorf("%s -version: %w", d.Path, err)
			return
		}
		var keep [][]byte
		for _, line := range bytes.Split(out, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("ffmpeg version")) || bytes.HasPrefix(line, []byte("lib")) {
				keep = append(keep, bytes.TrimSpace(line))
			}
		}
		if len(keep) == 0 {
			d.idErr = fmt.Errorf("%s -version: no version line in %q", d.Path, firstLine(out))
			return
		}
		d.id = string(bytes.Join(keep, []byte("\n")))
	})
	return d.id, d.idErr
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}
