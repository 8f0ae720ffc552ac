package video

import (
	"fmt"
	"strings"
)

// LeRobot decodes camera frames with one of two backends (LeRobotDataset's
// video_backend): torchcodec, its default wherever torchcodec loads, and
// PyAV. Both convert the decoded YUV frames to RGB with FFmpeg's swscale,
// but not alike: torchcodec interpolates the chroma planes bicubically and
// converts with the matrix the stream is tagged with; PyAV's
// frame.to_ndarray("rgb24") interpolates bilinearly and converts every
// stream with the default matrix (BT.601), whatever its colorspace tag.
// For the 8-bit 4:2:0, 4:2:2 and 4:4:4 streams LeRobot's writers make,
// untagged, the two give the same bytes (swscale's unscaled converters
// interpolate nothing); they differ on streams of 10 or 12 bits (up to
// ~60 levels at sharp edges) and on streams tagged BT.709 or BT.2020
// (~30–40 levels). FFmpeg.Backend says which one lrstream reproduces
// (docs/video.md, "Which LeRobot backend"); python/interop's
// test_camera_backends.py checks both against LeRobotDataset.
const (
	BackendTorchcodec = "torchcodec"
	BackendPyAV       = "pyav"
)

// CheckBackend returns an error unless b names a backend ("" is the default,
// torchcodec).
func CheckBackend(b string) error {
	switch b {
	case "", BackendTorchcodec, BackendPyAV:
		return nil
	}
	return fmt.Errorf("video backend %q: want %s (LeRobot's default) or %s", b, BackendTorchcodec, BackendPyAV)
}

// Conversion names the backend whose RGB frames this decoder reproduces
// (BackendTorchcodec or BackendPyAV): a frame cache keys its entries by it.
func (d *FFmpeg) Conversion() string {
	if d.Backend == BackendPyAV {
		return BackendPyAV
	}
	return BackendTorchcodec
}

// swsFlags is the interpolation of FFmpeg's conversion to RGB24 for the
// backend: bicubic (torchcodec) or bilinear (PyAV). A depth camera's
// gray12le frames, which LeRobot decodes with PyAV only, keep bilinear.
func (d *FFmpeg) swsFlags(gray bool) string {
	if gray || d.Conversion() == BackendPyAV {
		return "bilinear"
	}
	return "bicubic"
}

// ignoresTags reports whether the stream's colorspace tag is to be ignored
// (PyAV's conversion uses the default matrix for every stream).
func (d *FFmpeg) ignoresTags(gray bool) bool {
	return !gray && d.Conversion() == BackendPyAV
}

// BackendsDiffer says whether LeRobot's two backends decode a stream's
// frames to different RGB pixels, and why: a colour stream of more than 8
// bits per sample (chroma interpolated bicubically by torchcodec,
// bilinearly by PyAV) or tagged with a matrix other than BT.601's (honoured
// by torchcodec, ignored by PyAV). Gray streams (depth cameras) and RGB
// ones convert alike.
func BackendsDiffer(si StreamInfo) (why string, differ bool) {
	pf := si.PixFmt
	if pf == "" || strings.HasPrefix(pf, "gray") || strings.HasPrefix(pf, "gbr") || strings.HasPrefix(pf, "rgb") || strings.HasPrefix(pf, "bgr") {
		return "", false
	}
	if deep := strings.TrimSuffix(strings.TrimSuffix(pf, "le"), "be"); deep != pf && !strings.HasSuffix(deep, "p") ||
		strings.HasPrefix(pf, "p0") || strings.HasPrefix(pf, "p2") || strings.HasPrefix(pf, "p4") {
		return fmt.Sprintf("a %s video (more than 8 bits per sample: torchcodec interpolates its chroma bicubically, PyAV bilinearly)", pf), true
	}
	switch si.ColorSpace {
	case "", "unknown", "unspecified", "bt470bg", "smpte170m":
		return "", false
	}
	return fmt.Sprintf("a video tagged %s (torchcodec converts with that matrix, PyAV with BT.601's)", si.ColorSpace), true
}
