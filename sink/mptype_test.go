package sink

import "testing"

// TestMpHeadOf checks the classification of every type byte against the
// msgpack spec's table of formats.
func TestMpHeadOf(t *testing.T) {
	fixed := func(n uint8) func(byte) mpHead { return func(byte) mpHead { return mpHead{n: n} } }
	length := func(lenBytes, per uint8, str bool) func(byte) mpHead {
		return func(byte) mpHead { return mpHead{lenBytes: lenBytes, per: per, str: str} }
	}
	bad := func(byte) mpHead { return mpHead{bad: true} }
	formats := []struct {
		name   string
		lo, hi byte
		want   func(c byte) mpHead
	}{
		{"positive fixint", 0x00, 0x7f, fixed(0)},
		{"fixmap", 0x80, 0x8f, func(c byte) mpHead { return mpHead{n: c - 0x80, per: 2} }},
		{"fixarray", 0x90, 0x9f, func(c byte) mpHead { return mpHead{n: c - 0x90, per: 1} }},
		{"fixstr", 0xa0, 0xbf, func(c byte) mpHead { return mpHead{n: c - 0xa0, str: true} }},
		{"nil", 0xc0, 0xc0, fixed(0)},
		{"never used", 0xc1, 0xc1, bad},
		{"false, true", 0xc2, 0xc3, fixed(0)},
		{"bin 8", 0xc4, 0xc4, length(1, 0, false)},
		{"bin 16", 0xc5, 0xc5, length(2, 0, false)},
		{"bin 32", 0xc6, 0xc6, length(4, 0, false)},
		{"ext 8, 16, 32", 0xc7, 0xc9, bad},
		{"float 32", 0xca, 0xca, fixed(4)},
		{"float 64", 0xcb, 0xcb, fixed(8)},
		{"uint 8", 0xcc, 0xcc, fixed(1)},
		{"uint 16", 0xcd, 0xcd, fixed(2)},
		{"uint 32", 0xce, 0xce, fixed(4)},
		{"uint 64", 0xcf, 0xcf, fixed(8)},
		{"int 8", 0xd0, 0xd0, fixed(1)},
		{"int 16", 0xd1, 0xd1, fixed(2)},
		{"int 32", 0xd2, 0xd2, fixed(4)},
		{"int 64", 0xd3, 0xd3, fixed(8)},
		{"fixext", 0xd4, 0xd8, bad},
		{"str 8", 0xd9, 0xd9, length(1, 0, true)},
		{"str 16", 0xda, 0xda, length(2, 0, true)},
		{"str 32", 0xdb, 0xdb, length(4, 0, true)},
		{"array 16", 0xdc, 0xdc, length(2, 1, false)},
		{"array 32", 0xdd, 0xdd, length(4, 1, false)},
		{"map 16", 0xde, 0xde, length(2, 2, false)},
		{"map 32", 0xdf, 0xdf, length(4, 2, false)},
		{"negative fixint", 0xe0, 0xff, fixed(0)},
	}
	next := 0 // the formats cover 0x00 to 0xff in order, each byte once
	for _, f := range formats {
		if int(f.lo) != next || f.hi < f.lo {
			t.Fatalf("%s: range 0x%02x-0x%02x, want it to start at 0x%02x", f.name, f.lo, f.hi, next)
		}
		for c := int(f.lo); c <= int(f.hi); c++ {
			if got, want := mpHeadOf(byte(c)), f.want(byte(c)); got != want {
				t.Errorf("0x%02x (%s): got %+v, want %+v", c, f.name, got, want)
			}
		}
		next = int(f.hi) + 1
	}
	if next != 0x100 {
		t.Fatalf("the formats end at 0x%02x", next-1)
	}
}

func TestMpHeadsTable(t *testing.T) {
	for c := 0; c < 0x100; c++ {
		if mpHeads[c] != mpHeadOf(byte(c)) {
			t.Errorf("0x%02x: table %+v, mpHeadOf %+v", c, mpHeads[c], mpHeadOf(byte(c)))
		}
	}
}
