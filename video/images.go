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
	// Resize, when set, resizes every image to its camera's H×W (--resize;
	// bilinear with antialiasing, as torchvision's resize: see resize.go),
	// whatever its size. Without it an image must have the size info.json
	// declares.
	Resize bool
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
		err := decodeImage(encoded[idx], encoded != nil && encoded[idx] != nil, c, s.Resize, out)
		if err != nil {
			clear(out)
			fail(i, &FrameError{File: file, Camera: c.Key, Episode: episodes[i], Index: idx,
				Timestamp: math.NaN(), Query: math.NaN(), Nearest: math.NaN(), Err: err})
		}
	}
}

// decodeImage decodes one encoded image into dst (c's CHW frame): at its
// own size, which must be c's, or with resize at any size, resized to c's.
func decodeImage(b []byte, present bool, c Camera, resize bool, dst []byte) error {
	if !present {
		return errors.New("no image (null)")
	}
	img, format, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("decoding image: %w", err)
	}
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	if w == c.W && h == c.H {
		toPlanes(img, dst)
		return nil
	}
	if !resize {
		return fmt.Errorf("%s image is %dx%d, info.json says %dx%d (use --resize HxW to resize)", format, w, h, c.W, c.H)
	}
	if w == 0 || h == 0 {
		return fmt.Errorf("%s image is %dx%d: nothing to resize", format, w, h)
	}
	src := make([]byte, 3*w*h)
	toPlanes(img, src)
	resizePlanes(src, 3, h, w, dst, c.H, c.W)
	return nil
}

// toPlanes writes img's RGB pixels into dst as three planes (CHW).
func toPlanes(img image.Image, dst []byte) {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	n := w * h
	R, G, B := dst[:n], dst[n:2*n], dst[2*n:3*n]
	switch m := img.(type) {
	case *image.RGBA:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := 0; x < w; x++ {
				p := y*w + x
				R[p], G[p], B[p] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	case *image.NRGBA:
		// PIL's convert("RGB") drops alpha without premultiplying.
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := 0; x < w; x++ {
				p := y*w + x
				R[p], G[p], B[p] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				p := y*w + x
				col := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
				R[p], G[p], B[p] = col.R, col.G, col.B
			}
		}
	}
}
