// Package half converts IEEE 754 half-precision (float16) values, which
// parquet files and the wire format carry but Go has no type for.
package half

import "math"

// ToFloat32 converts the bits of an IEEE 754 half-precision number to the
// float32 of the same value (exact: every float16 is a float32), keeping
// the sign of zero, infinities and NaN payloads.
func ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(frac) / 1024 / 16384 // subnormal: frac × 2^-24
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
