package sink

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/lrstream/lrstream/internal/half"
	"math"
	"strconv"

	"github.com/lrstream/lrstream/schema"
)

// appendJSONFloat writes f so that it reads back as a float: NaN and the
// infinities (not JSON) as the strings "NaN", "Infinity", "-Infinity".
func appendJSONFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, bits)
	for _, c := range b[start:] {
		if c == '.' || c == 'e' {
			return b
		}
	}
	return append(b, '.', '0')
}

// appendJSONValue writes a generic value (see Decoder.Next) as JSON.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case float64:
		return appendJSONFloat(b, x, 64), nil
	case float32:
		return appendJSONFloat(b, float64(x), 32), nil
	case string:
		return schema.AppendJSONString(b, x), nil
	case []byte:
		return schema.AppendJSONString(b, base64.StdEncoding.EncodeToString(x)), nil
	case json.RawMessage:
		return appendCompactJSON(b, x)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case []schema.Map:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONValue(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case schema.Map:
		b = append(b, '{')
		for i, k := range x.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = schema.AppendJSONString(b, k)
			b = append(b, ':')
			if b, err = appendJSONValue(b, x.Values[i]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case *Array:
		return appendArrayJSON(b, x.DType, x.Shape, x.Data)
	}
	return b, fmt.Errorf("unsupported value type %T", v)
}

// appendCompactJSON appends JSON text without insignificant whitespace,
// keeping key order.
func appendCompactJSON(b []byte, raw []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, fmt.Errorf("invalid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// appendArrayJSON writes a little-endian C-order array as nested JSON lists.
func appendArrayJSON(b []byte, dtype string, shape []int, data []byte) ([]byte, error) {
	if len(dtype) < 3 {
		return b, fmt.Errorf("unsupported dtype %q", dtype)
	}
	size, err := strconv.Atoi(dtype[2:])
	if err != nil || size <= 0 {
		return b, fmt.Errorf("unsupported dtype %q", dtype)
	}
	kind := dtype[1]
	elems := 1
	for _, d := range shape {
		elems *= d
	}
	if elems*size != len(data) {
		return b, fmt.Errorf("array of %s %v has %d bytes", dtype, shape, len(data))
	}
	elem := func(b []byte, p []byte) ([]byte, error) {
		le := binary.LittleEndian
		switch {
		case kind == 'b' && size == 1:
			return strconv.AppendBool(b, p[0] != 0), nil
		case kind == 'f' && size == 4:
			return appendJSONFloat(b, float64(math.Float32frombits(le.Uint32(p))), 32), nil
		case kind == 'f' && size == 8:
			return appendJSONFloat(b, math.Float64frombits(le.Uint64(p)), 64), nil
		case kind == 'f' && size == 2:
			return appendJSONFloat(b, float64(half.ToFloat32(le.Uint16(p))), 32), nil
		case kind == 'i' && size == 1:
			return strconv.AppendInt(b, int64(int8(p[0])), 10), nil
		case kind == 'i' && size == 2:
			return strconv.AppendInt(b, int64(int16(le.Uint16(p))), 10), nil
		case kind == 'i' && size == 4:
			return strconv.AppendInt(b, int64(int32(le.Uint32(p))), 10), nil
		case kind == 'i' && size == 8:
			return strconv.AppendInt(b, int64(le.Uint64(p)), 10), nil
		case kind == 'u' && size == 1:
			return strconv.AppendUint(b, uint64(p[0]), 10), nil
		case kind == 'u' && size == 2:
			return strconv.AppendUint(b, uint64(le.Uint16(p)), 10), nil
		case kind == 'u' && size == 4:
			return strconv.AppendUint(b, uint64(le.Uint32(p)), 10), nil
		case kind == 'u' && size == 8:
			return strconv.AppendUint(b, le.Uint64(p), 10), nil
		}
		return b, fmt.Errorf("unsupported dtype %q", dtype)
	}
	var rec func(b []byte, dim int, off int) ([]byte, int, error)
	rec = func(b []byte, dim int, off int) ([]byte, int, error) {
		if dim == len(shape) {
			b, err := elem(b, data[off:off+size])
			return b, off + size, err
		}
		b = append(b, '[')
		var err error
		for i := 0; i < shape[dim]; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, off, err = rec(b, dim+1, off); err != nil {
				return b, off, err
			}
		}
		return append(b, ']'), off, nil
	}
	b, _, err = rec(b, 0, 0)
	return b, err
}
