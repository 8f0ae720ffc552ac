package video

import (
	"context"
	"errors"
	"fmt"
)

// Segment is a time range of one video file to decode.
type Segment struct {
	// Path is the local path of the video file.
	Path string
	// Start and End bound the presentation timestamps (seconds) of the
	// frames to decode: every frame with Start <= pts <= End, in pts order.
	Start, End float64
	// Width and Height, when both set, resize every frame (bilinear);
	// zero keeps the file's size.
	Width, Height int
	// Gray12 asks for the frames as 12-bit gray codes (a depth camera:
	// Frame.Gray12); the stream must have at least 12 bits per sample.
	Gray12 bool
}

// Frame is one decoded frame. Pix is RGB, 8 bits per channel, rows of
// Width×3 bytes (HWC), unless YUV is set: then Pix is the frame as planar
// YUV 4:2:0 (Y, U, V planes; Width×Height×3/2 bytes) that YUV converts to
// exactly the RGB FFmpeg would have produced (ToCHW). Pix stays valid
// until the callback after the one that receives it returns (decoders
// alternate two buffers), so a consumer can compare a frame with the next
// without copying.
type Frame struct {
	// PTS is the frame's presentation timestamp in seconds (the stream's
	// pts times its time base, as PyAV's frame.pts * stream.time_base).
	PTS           float64
	Width, Height int
	Pix           []byte
	// YUV, when set, says Pix is YUV 4:2:0 and converts it.
	YUV *YUV
	// Gray12 says Pix is Width×Height little-endian 16-bit gray codes
	// (gray12le: 0…4095), for a depth camera.
	Gray12 bool
	raw    []byte // the decoder's buffer holding Pix
}

// Decoder decodes the frames of one segment sequentially, from at most one
// seek (FFmpeg continues a kept process without any), and calls fn with
// each in presentation order. It stops at fn's first error and returns it
// (ErrStop: without error). Implementations are safe for concurrent use.
type Decoder interface {
	Decode(ctx context.Context, seg Segment, fn func(Frame) error) error
}

// ErrNoFFmpeg is returned (wrapped) when frames are requested and the
// ffmpeg executable cannot be found.
var ErrNoFFmpeg = errors.New("ffmpeg not found: camera frames need FFmpeg (install it, e.g. `apt-get install ffmpeg`, `brew install ffmpeg`), or skip cameras with --cameras none")

// FrameError is a sample whose camera frame could not be produced.
type FrameError struct {
	File    string
	Camera  string
	Episode int64
	// Index is the sample's dataset index; Timestamp its timestamp within
	// the episode, Query the timestamp looked up in the file.
	Index     int64
	Timestamp float64
	Query     float64
	// Nearest is the timestamp of the nearest decoded frame; NaN when the
	// segment decoded no frame.
	Nearest float64
	Err     error
}

func (e *FrameError) Error() string {
	if e.Query != e.Query { // NaN: an image feature, no timestamps
		return fmt.Sprintf("%s: camera %s, episode %d, index %d: %v", e.File, e.Camera, e.Episode, e.Index, e.Err)
	}
	if e.Nearest != e.Nearest { // NaN
		return fmt.Sprintf("%s: camera %s, episode %d, index %d (timestamp %.6f, video timestamp %.6f): %v",
			e.File, e.Camera, e.Episode, e.Index, e.Timestamp, e.Query, e.Err)
	}
	return fmt.Sprintf("%s: camera %s, episode %d, index %d (timestamp %.6f, video timestamp %.6f, nearest frame at %.6f): %v",
		e.File, e.Camera, e.Episode, e.Index, e.Timestamp, e.Query, e.Nearest, e.Err)
}

// Unwrap returns the cause.
func (e *FrameError) Unwrap() error { return e.Err }

// ErrTolerance is the cause of a FrameError whose nearest frame is too far
// from the requested timestamp.
var ErrTolerance = errors.New("no frame within tolerance")
