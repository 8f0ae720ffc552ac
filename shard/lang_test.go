package shard

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestEqualStrRange(t *testing.T) {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	// 0..2: a bc <null>; 3..5: a bc <null>; 6..8: a bd <null>; 9..11: ab c <null>
	for _, v := range []string{"a", "bc", "", "a", "bc", "", "a", "bd", "", "ab", "c", ""} {
		b.Append(v)
	}
	arr := b.NewStringArray()
	// Make index 2, 5, 8, 11 null by rebuilding with validity.
	b2 := array.NewStringBuilder(memory.DefaultAllocator)
	for i := 0; i < arr.Len(); i++ {
		if i%3 == 2 {
			b2.AppendNull()
		} else {
			b2.Append(arr.Value(i))
		}
	}
	s := b2.NewStringArray()
	for _, c := range []struct {
		i, j int
		want bool
	}{{0, 3, true}, {0, 6, false}, {0, 9, false}, {3, 3, true}} {
		if got := equalStrRange(s, c.i, c.j, 3); got != c.want {
			t.Errorf("equalStrRange(%d, %d) = %v", c.i, c.j, got)
		}
	}
	// A sliced array (non-zero offset) compares the same.
	sl := array.NewSlice(s, 3, 12).(*array.String)
	if !equalStrRange(sl, 0, 0, 3) || equalStrRange(sl, 0, 3, 3) {
		t.Error("sliced array")
	}
	// Null vs empty string differ.
	b3 := array.NewStringBuilder(memory.DefaultAllocator)
	b3.Append("")
	b3.AppendNull()
	e := b3.NewStringArray()
	if equalStrRange(e, 0, 1, 1) {
		t.Error("null equals empty string")
	}
}
