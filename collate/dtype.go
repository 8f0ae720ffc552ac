package collate

import (
	"fmt"
	"strconv"
)

// Feature describes one stacked numeric column: its name, its numpy dtype
// string (for example "<f4", "<f8", "<i8", "<i4", "|u1", "|b1") and the
// shape of one sample's value (without the batch dimension; empty for a
// scalar).
type Feature struct {
	Name  string
	DType string
	Shape []int
}

// ItemSize returns the size in bytes of one element of f's dtype.
func (f Feature) ItemSize() int {
	n, _ := itemSize(f.DType)
	return n
}

// Elems returns the number of elements of one sample's value.
func (f Feature) Elems() int {
	n := 1
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

// FrameBytes returns the size in bytes of one sample's value.
func (f Feature) FrameBytes() int { return f.ItemSize() * f.Elems() }

// Validate reports whether f has a supported little-endian numpy dtype, a
// non-negative shape and a name.
func (f Feature) Validate() error {
	if f.Name == "" {
		return fmt.Errorf("collate: feature with an empty name")
	}
	if _, err := itemSize(f.DType); err != nil {
		return fmt.Errorf("collate: feature %q: %w", f.Name, err)
	}
	for _, d := range f.Shape {
		if d < 0 {
			return fmt.Errorf("collate: feature %q: negative dimension in shape %v", f.Name, f.Shape)
		}
	}
	return nil
}

// itemSize parses a numpy array-protocol type string such as "<f4" and
// returns its item size. Only little-endian ('<') or byte-order-free ('|')
// bool, integer, unsigned and float types are supported.
func itemSize(dt string) (int, error) {
	if len(dt) < 3 {
		return 0, fmt.Errorf("unsupported dtype %q", dt)
	}
	order, kind := dt[0], dt[1]
	n, err := strconv.Atoi(dt[2:])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("unsupported dtype %q", dt)
	}
	switch kind {
	case 'b':
		if n != 1 {
			return 0, fmt.Errorf("unsupported dtype %q", dt)
		}
	case 'i', 'u':
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return 0, fmt.Errorf("unsupported dtype %q", dt)
		}
	case 'f':
		if n != 2 && n != 4 && n != 8 {
			return 0, fmt.Errorf("unsupported dtype %q", dt)
		}
	default:
		return 0, fmt.Errorf("unsupported dtype %q", dt)
	}
	switch {
	case order == '|' && n == 1, order == '<':
	default:
		return 0, fmt.Errorf("unsupported dtype %q (want little-endian '<', or '|' for 1-byte types)", dt)
	}
	return n, nil
}
