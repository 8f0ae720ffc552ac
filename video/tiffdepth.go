package video

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Depth image features: LeRobot 0.6.1's writer with use_videos=False stores
// a depth camera as one TIFF per frame (PIL: uint16 millimetres as "I;16",
// float32 metres as "F"; uncompressed) in the data files' image column,
// with the unit of the values it was given in info["depth_unit"].
// LeRobotDataset returns them as float32 (1, H, W) in those units
// (io_utils.pil_to_chw_tensor), converted to depth_output_unit when
// depth_unit is known (× 1000 from metres, / 1000 from millimetres, in
// float32), as is when it is not.

// imageDepth converts a depth image feature's values.
type imageDepth struct {
	stored string // info.depth_unit: "mm", "m" or "" (unknown: as stored)
	out    string // --depth-unit
}

// unit is the unit of the values in the batches ("" when unknown).
func (d *imageDepth) unit() string {
	if d.stored == "" {
		return ""
	}
	return d.out
}

// convert applies LeRobot's unit conversion to one value.
func (d *imageDepth) convert(v float32) float32 {
	switch {
	case d.stored == "" || d.stored == d.out:
		return v
	case d.stored == DepthMetres:
		return float32(v * 1000)
	default:
		return float32(v / 1000)
	}
}

// maxTIFFPixels bounds a TIFF's size before anything is allocated.
const maxTIFFPixels = 1 << 26

// decodeDepthTIFF decodes a one-channel uncompressed TIFF of 16-bit
// unsigned or 32-bit float samples (what PIL writes for LeRobot's depth
// frames) to float32 values, row by row. Other layouts are errors saying
// what the file holds.
func decodeDepthTIFF(b []byte) (w, h int, vals []float32, err error) {
	if len(b) < 8 {
		return 0, 0, nil, errors.New("TIFF: shorter than its header")
	}
	bo, ifd, ok := tiffHeader(b)
	if !ok {
		return 0, 0, nil, errors.New("not a TIFF image (depth image features are TIFF)")
	}
	tags, err := readIFD(b, bo, int(ifd))
	if err != nil {
		return 0, 0, nil, err
	}
	w, h = int(tags.one(256, 0)), int(tags.one(257, 0))
	bits, format := tags.one(258, 1), tags.one(339, 1)
	switch {
	case w <= 0 || h <= 0 || w*h > maxTIFFPixels:
		return 0, 0, nil, fmt.Errorf("TIFF: size %dx%d", w, h)
	case tags.one(277, 1) != 1:
		return 0, 0, nil, fmt.Errorf("TIFF: %d samples per pixel, a depth map has 1", tags.one(277, 1))
	case tags.one(259, 1) != 1:
		return 0, 0, nil, fmt.Errorf("TIFF: compression %d; lrstream reads uncompressed depth TIFFs (what LeRobot writes)", tags.one(259, 1))
	case !(bits == 16 && format == 1) && !(bits == 32 && format == 3):
		return 0, 0, nil, fmt.Errorf("TIFF: %d-bit samples of format %d; a depth map is 16-bit unsigned or 32-bit float", bits, format)
	}
	size := int(bits / 8)
	offs, counts := tags[273], tags[279]
	if len(offs) == 0 || len(offs) != len(counts) {
		return 0, 0, nil, errors.New("TIFF: strip offsets and byte counts missing or of different lengths")
	}
	raw := make([]byte, 0, w*h*size)
	for i, o := range offs {
		if o > uint64(len(b)) || counts[i] > uint64(len(b))-o {
			return 0, 0, nil, fmt.Errorf("TIFF: strip %d beyond the file", i)
		}
		raw = append(raw, b[o:o+counts[i]]...)
		if len(raw) > w*h*size {
			break
		}
	}
	if len(raw) < w*h*size {
		return 0, 0, nil, fmt.Errorf("TIFF: %d bytes of pixels, %dx%d needs %d", len(raw), w, h, w*h*size)
	}
	vals = make([]float32, w*h)
	for i := range vals {
		if size == 2 {
			vals[i] = float32(bo.Uint16(raw[2*i:]))
		} else {
			vals[i] = math.Float32frombits(bo.Uint32(raw[4*i:]))
		}
	}
	return w, h, vals, nil
}

// tiffTags holds an IFD's numeric tag values.
// tiffHeader reads a TIFF header (an image's, or EXIF data's): its byte
// order and the offset of its first IFD; ok is false for anything else.
func tiffHeader(b []byte) (bo binary.ByteOrder, ifd int64, ok bool) {
	if len(b) < 8 {
		return nil, 0, false
	}
	switch string(b[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return nil, 0, false
	}
	return bo, int64(bo.Uint32(b[4:8])), true
}

type tiffTags map[uint16][]uint64

// one returns a tag's single value, def when absent.
func (t tiffTags) one(tag uint16, def uint64) uint64 {
	if v := t[tag]; len(v) > 0 {
		return v[0]
	}
	return def
}

// readIFD reads the numeric (SHORT, LONG) tags of the IFD at off.
func readIFD(b []byte, bo binary.ByteOrder, off int) (tiffTags, error) {
	if off < 8 || off+2 > len(b) {
		return nil, errors.New("TIFF: directory offset beyond the file")
	}
	n := int(bo.Uint16(b[off:]))
	if off+2+12*n > len(b) {
		return nil, errors.New("TIFF: directory beyond the file")
	}
	tags := tiffTags{}
	for i := range n {
		e := b[off+2+12*i:]
		tag, typ, count := bo.Uint16(e), bo.Uint16(e[2:]), uint64(bo.Uint32(e[4:]))
		var size uint64
		switch typ {
		case 3: // SHORT
			size = 2
		case 4: // LONG
			size = 4
		default:
			continue
		}
		if count > uint64(len(b))/size {
			return nil, fmt.Errorf("TIFF: tag %d count %d beyond the file", tag, count)
		}
		data := e[8:12]
		if count*size > 4 {
			o := uint64(bo.Uint32(e[8:]))
			if o > uint64(len(b)) || count*size > uint64(len(b))-o {
				return nil, fmt.Errorf("TIFF: tag %d values beyond the file", tag)
			}
			data = b[o : o+count*size]
		}
		vals := make([]uint64, count)
		for k := range vals {
			if size == 2 {
				vals[k] = uint64(bo.Uint16(data[2*k:]))
			} else {
				vals[k] = uint64(bo.Uint32(data[4*k:]))
			}
		}
		tags[tag] = vals
	}
	return tags, nil
}
