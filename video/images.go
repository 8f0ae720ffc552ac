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
	if c.img != nil {
		return decodeDepthImage(b, c, resize, dst)
	}
	o, err := checkImageHeader(b, c, resize)
	if err != nil {
		return err
	}
	img, format, err := decodeEncoded(b)
	if err != nil {
		return fmt.Errorf("decoding image: %w", err)
	}
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	// An EXIF orientation turns the image as LeRobot's reader does (exif.go).
	ow, oh := orientedSize(o, w, h)
	if ow != c.W || oh != c.H {
		if !resize {
			// The header said otherwise (CheckImageHeader): a decoder bug
			// or a file whose header and data disagree.
			return fmt.Errorf("%s image is %dx%d%s, info.json says %dx%d (use --resize HxW to resize)", format, ow, oh, orientedNote(o), c.W, c.H)
		}
		src := make([]byte, 3*ow*oh)
		toOrientedPlanes(img, o, src)
		resizePlanes(src, 3, oh, ow, dst, c.H, c.W)
		return nil
	}
	toOrientedPlanes(img, o, dst)
	return nil
}

// toOrientedPlanes writes img's RGB planes, turned by EXIF orientation o,
// into dst.
func toOrientedPlanes(img image.Image, o int, dst []byte) {
	if o <= 1 {
		toPlanes(img, dst)
		return
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	raw := make([]byte, 3*w*h)
	toPlanes(img, raw)
	orientPlanes(dst, raw, 3, w, h, o)
}

// orientedNote says, in a size error, that the size is after an EXIF
// orientation.
func orientedNote(o int) string {
	if o <= 1 {
		return ""
	}
	return fmt.Sprintf(" once turned by its EXIF orientation %d", o)
}

// decodeEncoded decodes a PNG or JPEG image. A JPEG goes through
// decodeJPEG (libjpeg's arithmetic, so that its pixels are PIL's); one it
// does not take, or finds damaged, through image/jpeg.
func decodeEncoded(b []byte) (image.Image, string, error) {
	if len(b) >= 2 && b[0] == 0xFF && b[1] == 0xD8 {
		if img, ok, err := decodeJPEG(b); ok && err == nil {
			return img, "jpeg", nil
		}
	}
	return image.Decode(bytes.NewReader(b))
}

// MaxImagePixels is PIL's Image.MAX_IMAGE_PIXELS (1024·1024·1024 / 4 / 3):
// PIL, which LeRobot decodes image features with, warns about an image
// larger than this and refuses one larger than twice this
// (DecompressionBombError). lrstream refuses what PIL refuses.
const MaxImagePixels = 1024 * 1024 * 1024 / 4 / 3

// CheckImageHeader reads an encoded image's header (image.DecodeConfig:
// the PNG IHDR chunk or the JPEG SOF marker; no pixel is decoded) and
// refuses, before anything is allocated for its pixels, an image whose
// size differs from c's (without resize: info.json's shape is what the
// batches declare) or that has more than 2·MaxImagePixels pixels (PIL's
// decompression-bomb limit; with resize any size up to that is
// accepted). A 560 KB PNG can declare 24000x24000 pixels.
func CheckImageHeader(b []byte, c Camera, resize bool) error {
	_, err := checkImageHeader(b, c, resize)
	return err
}

// checkImageHeader is CheckImageHeader returning, as well, the image's EXIF
// orientation (exifOrientation), which it reads to know the turned size.
func checkImageHeader(b []byte, c Camera, resize bool) (orientation int, err error) {
	if c.img != nil { // a depth image: LeRobot's TIFF
		w, h, _, err := decodeDepthTIFF(b)
		if err != nil {
			return 0, err
		}
		if !resize && (w != c.W || h != c.H) {
			return 0, fmt.Errorf("depth image is %dx%d, info.json says %dx%d (use --resize HxW to resize)", w, h, c.W, c.H)
		}
		return 0, nil
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("decoding image header: %w", err)
	}
	o := exifOrientation(b)
	w, h := orientedSize(o, cfg.Width, cfg.Height)
	if !resize && (w != c.W || h != c.H) {
		return 0, fmt.Errorf("%s image is %dx%d%s, info.json says %dx%d (use --resize HxW to resize)", format, w, h, orientedNote(o), c.W, c.H)
	}
	if w <= 0 || h <= 0 {
		return 0, fmt.Errorf("%s image is %dx%d: no pixels", format, w, h)
	}
	if int64(w)*int64(h) > 2*MaxImagePixels {
		return 0, fmt.Errorf("%s image is %dx%d = %d pixels, more than twice PIL's MAX_IMAGE_PIXELS (%d): refused as a decompression bomb, as PIL refuses it",
			format, w, h, int64(w)*int64(h), int64(MaxImagePixels))
	}
	return o, nil
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
	case *image.YCbCr:
		// A colour JPEG: converted as libjpeg converts it (jpegconv.go).
		if ycbcrToPlanes(m, dst) {
			return
		}
		toPlanesAny(img, dst)
	default:
		toPlanesAny(img, dst)
	}
}

// toPlanesAny converts any image through color.NRGBAModel.
func toPlanesAny(img image.Image, dst []byte) {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	n := w * h
	R, G, B := dst[:n], dst[n:2*n], dst[2*n:3*n]
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := y*w + x
			col := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
			R[p], G[p], B[p] = col.R, col.G, col.B
		}
	}
}

// CheckImage is lrstream validate's check of one encoded image of camera
// c (its data file's <key>.bytes), for what Fill would refuse: a null or
// empty image, a header that is not an image's, a size other than
// info.json's or beyond PIL's limit (CheckImageHeader), a PNG whose
// chunks are cut short or damaged (CheckPNG) — all without decoding the
// pixels; with deep, the image is also decoded whole, as Fill decodes it.
func CheckImage(b []byte, present bool, c Camera, deep bool) error {
	if !present {
		return errors.New("no image (null)")
	}
	if err := CheckImageHeader(b, c, false); err != nil {
		return err
	}
	if bytes.HasPrefix(b, []byte(pngSignature)) {
		if err := CheckPNG(b); err != nil {
			return fmt.Errorf("decoding image: %w", err)
		}
	}
	if deep {
		return decodeImage(b, true, c, false, make([]byte, c.FrameBytes()))
	}
	return nil
}
