package collate

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/lrstream/lrstream/internal/half"
)

// Emission rules: the dtype and per-sample shape a numeric feature has in
// the batches, as LeRobotDataset (lerobot 0.6.1) returns it.
//
// LeRobot reads the data files through Hugging Face datasets with its
// hf_transform_to_torch transform, which builds every value with
// torch.tensor(python value):
//
//   - a feature of info.json shape (1,) is a datasets.Value (a scalar
//     column), so each item is a 0-d tensor and the collated batch is (N,);
//     with --delta-timestamps the window is (N, k), not (N, k, 1);
//   - Python ints become int64 (every signed and unsigned width), Python
//     floats float32 (torch's default dtype: float16 and float64 too), bools
//     bool. An unsigned 64-bit value above 2^63-1 does not fit: torch raises
//     ("Overflow when unpacking long"), lrstream refuses the frame.
//
// Checked against LeRobotDataset[i] on a dataset written by LeRobot's own
// writer with a feature of every dtype info.json allows
// (python/interop/test_lerobot_dtypes.py).

// EmittedDType returns the numpy dtype a stored numpy dtype is emitted as:
// "<i8" for every integer, "<f4" for every float, "|b1" for bool.
func EmittedDType(stored string) (string, error) {
	switch stored {
	case "|b1":
		return "|b1", nil
	case "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8":
		return "<i8", nil
	case "<f2", "<f4", "<f8":
		return "<f4", nil
	}
	return "", fmt.Errorf("unsupported dtype %q", stored)
}

// EmittedShape returns the per-sample shape a feature of stored per-sample
// shape is emitted with: a shape of (1,) is a scalar, anything else stays.
func EmittedShape(shape []int) []int {
	if len(shape) == 1 && shape[0] == 1 {
		return []int{}
	}
	return slices.Clone(shape)
}

// Emitted returns f with its emitted dtype and shape.
func Emitted(f Feature) (Feature, error) {
	dt, err := EmittedDType(f.DType)
	if err != nil {
		return f, fmt.Errorf("feature %s: %w", f.Name, err)
	}
	return Feature{Name: f.Name, DType: dt, Shape: EmittedShape(f.Shape)}, nil
}

// ConvertError is a value that LeRobot's conversion refuses (an unsigned
// 64-bit value above 2^63-1): Elem is its position in the converted data.
type ConvertError struct {
	Elem  int
	Value uint64
}

func (e *ConvertError) Error() string {
	return fmt.Sprintf("value %d does not fit int64 (LeRobot's torch.tensor raises \"Overflow when unpacking long\")", e.Value)
}

// ConvertData converts little-endian values of the stored dtype to the
// emitted dtype (EmittedDType). When they are the same, data itself is
// returned (no copy); otherwise a new slice.
func ConvertData(stored string, data []byte) ([]byte, error) {
	emitted, err := EmittedDType(stored)
	if err != nil {
		return nil, err
	}
	if emitted == stored {
		return data, nil
	}
	isz, _ := itemSize(stored)
	if len(data)%isz != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of %s values", len(data), stored)
	}
	n := len(data) / isz
	if emitted == "<f4" {
		out := make([]byte, 4*n)
		for i := range n {
			var v float32
			if stored == "<f2" {
				v = half.ToFloat32(binary.LittleEndian.Uint16(data[2*i:]))
			} else {
				v = float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
			}
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	}
	out := make([]byte, 8*n)
	for i := range n {
		v, err := intAt(stored, data, i)
		if err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint64(out[8*i:], uint64(v))
	}
	return out, nil
}

// intAt reads integer i of data (stored dtype) as int64.
func intAt(stored string, data []byte, i int) (int64, error) {
	switch stored {
	case "|i1":
		return int64(int8(data[i])), nil
	case "<i2":
		return int64(int16(binary.LittleEndian.Uint16(data[2*i:]))), nil
	case "<i4":
		return int64(int32(binary.LittleEndian.Uint32(data[4*i:]))), nil
	case "|u1":
		return int64(data[i]), nil
	case "<u2":
		return int64(binary.LittleEndian.Uint16(data[2*i:])), nil
	case "<u4":
		return int64(binary.LittleEndian.Uint32(data[4*i:])), nil
	case "<u8":
		u := binary.LittleEndian.Uint64(data[8*i:])
		if u > math.MaxInt64 {
			return 0, &ConvertError{Elem: i, Value: u}
		}
		return int64(u), nil
	}
	return 0, fmt.Errorf("unsupported integer dtype %q", stored)
}
