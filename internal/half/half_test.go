package half

import (
	"math"
	"testing"
)

func TestToFloat32(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x3555, 0.333251953125},
		{0x0001, 5.960464477539063e-08}, {0x8001, -5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05},
		{0x0400, 6.103515625e-05}, {0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		if got := ToFloat32(tc.h); got != tc.want {
			t.Errorf("ToFloat32(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if got := ToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("ToFloat32(0x8000) = %v, want -0", got)
	}
	if got := ToFloat32(0x7e00); !math.IsNaN(float64(got)) {
		t.Errorf("ToFloat32(0x7e00) = %v, want NaN", got)
	}
}
