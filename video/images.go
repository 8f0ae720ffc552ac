package video

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // LeRobot image features may hold JPEG bytes
	_ "image/png"  // LeRobot writes PNG
	"math"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/shard"
)

// ImageSet decodes image features (dtype "image": PNG or JPEG bytes in
// the data files' <key>.bytes column) for batches of samples, with Go's
// image/png and image/jpeg. It is safe for concurrent use.
type ImageSet struct {
	Source  fetch.Source
	Cameras []Camera
}

// ReadImageBytes reads the encoded images of the given image features
// from one row group of a data file: for each key, a map from the
// sample's dataset index to its bytes (absent for a null image). It is
// shard.ReadImageBytes, which reads parquet for the whole project.
func ReadImageBytes(ctx context.Context, src fetch.Source, name string, rowGroup int, keys []string) (map[string]map[int64][]byte, error) {
	return shard.ReadImageBytes(ctx, src, name, rowGroup, keys)
}

// Fill decodes camera cam's images for the samples (episodes[i],
// index[i]) from encoded (dataset index → bytes, ReadImageBytes) into dst
// (CHW frames; every byte written). A sample whose image is missing,
// undecodable or of the wrong size is passed to fail with a *FrameError
// naming file (the data file).
func (s *ImageSet) Fill(file string, cam int, episodes, index []int64, encoded map[int64][]byte, dst []byte, fail func(i int, err error)) {
	c := s.Cameras[cam]
	fb := c.FrameBytes()
	for i, idx := range index {
		out := dst[i*fb : (i+1)*fb]
		err := decodeImage(encoded[idx], encoded != nil && encoded[idx] != nil, c, out)
		if err != nil {
			clear(out)
			fail(i, &FrameError{File: file, Camera: c.Key, Episode: episodes[i], Index: idx,
				Timestamp: math.NaN(), Query: math.NaN(), Nearest: math.NaN(), Err: err})
		}
	}
}

func decodeImage(b []byte, present bool, c Camera, dst []byte) error {
	if !present {
		return errors.New("no image (null)")
	}
	img, format, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("decoding image: %w", err)
	}
	r := img.Bounds()
	if r.Dx() != c.W || r.Dy() != c.H {
		return fmt.Errorf("%s image is %dx%d, info.json says %dx%d", format, r.Dx(), r.Dy(), c.W, c.H)
	}
	n := c.W * c.H
	R, G, B := dst[:n], dst[n:2*n], dst[2*n:3*n]
	switch m := img.(type) {
	case *image.RGBA:
		for y := 0; y < c.H; y++ {
			row := m.Pix[(y)*m.Stride : y*m.Stride+4*c.W]
			for x := 0; x < c.W; x++ {
				p := y*c.W + x
				R[p], G[p], B[p] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	case *image.NRGBA:
		// PIL's convert("RGB") drops alpha without premultiplying.
		for y := 0; y < c.H; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*c.W]
			for x := 0; x < c.W; x++ {
				p := y*c.W + x
				R[p], G[p], B[p] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	default:
		for y := 0; y < c.H; y++ {
			for x := 0; x < c.W; x++ {
				p := y*c.W + x
				col := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
				R[p], G[p], B[p] = col.R, col.G, col.B
			}
		}
	}
	return nil
}
