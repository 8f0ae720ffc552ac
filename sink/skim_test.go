package sink

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

// mp builds a msgpack message from encoded pieces.
func mp(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestFieldSpan(t *testing.T) {
	str := func(s string) []byte { return mpStr(nil, s) }
	msg := mp([]byte{0x83}, str("type"), str("batch"), str("seq"), AppendInt(nil, 70000), str("size"), []byte{0x05})
	seq := bytes.Index(msg, AppendInt(nil, 70000))
	for _, tc := range []struct {
		name       string
		msg        []byte
		key        string
		start, end int
		trunc      bool // the error wraps io.ErrUnexpectedEOF too
		bad        bool
	}{
		{name: "first", msg: msg, key: "type", start: 6, end: 12},
		{name: "middle", msg: msg, key: "seq", start: seq, end: seq + 5},
		{name: "last", msg: msg, key: "size", start: len(msg) - 1, end: len(msg)},
		{name: "absent", msg: msg, key: "epoch", start: -1, end: -1},
		{name: "empty map", msg: []byte{0x80}, key: "seq", start: -1, end: -1},
		{name: "map 16", msg: mp([]byte{0xde, 0, 1}, str("seq"), []byte{0x07}), key: "seq", start: 7, end: 8},
		{name: "map 32", msg: mp([]byte{0xdf, 0, 0, 0, 1}, str("seq"), []byte{0x07}), key: "seq", start: 9, end: 10},
		{name: "str 8 key", msg: mp([]byte{0x81, 0xd9, 3}, []byte("seq"), []byte{0x07}), key: "seq", start: 6, end: 7},
		{name: "nested value", msg: mp([]byte{0x82}, str("a"), []byte{0x91, 0x81, 0xa1, 'x', 0xc0}, str("seq"), []byte{0x01}), key: "seq", start: 12, end: 13},
		{name: "non-str key skipped", msg: mp([]byte{0x82, 0x01, 0x02}, str("seq"), []byte{0x03}), key: "seq", start: 7, end: 8},
		{name: "empty", msg: nil, key: "seq", trunc: true},
		{name: "not a map", msg: mp([]byte{0x91, 0x01}), key: "seq", bad: true},
		{name: "map 16 header cut", msg: []byte{0xde, 0}, key: "seq", trunc: true},
		{name: "key cut", msg: mp([]byte{0x81, 0xa3}, []byte("se")), key: "seq", trunc: true},
		{name: "value missing", msg: mp([]byte{0x81}, str("seq")), key: "seq", trunc: true},
		{name: "value cut", msg: msg[:seq+3], key: "seq", trunc: true},
		{name: "bin length past the end", msg: mp([]byte{0x81}, str("seq"), []byte{0xc6, 0xff, 0xff, 0xff, 0xff}), key: "seq", trunc: true},
		{name: "fewer entries than the header", msg: msg[:len(msg)-6] /* no size entry */, key: "size", trunc: true},
		{name: "reserved type byte", msg: mp([]byte{0x82}, str("a"), []byte{0xc1}, str("seq"), []byte{0x01}), key: "seq", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end, err := FieldSpan(tc.msg, tc.key)
			if tc.trunc || tc.bad {
				if err == nil || !errors.Is(err, ErrMalformed) || errors.Is(err, io.ErrUnexpectedEOF) != tc.trunc {
					t.Fatalf("got %d, %d, %v; want an error (truncated: %v)", start, end, err, tc.trunc)
				}
				if start != -1 || end != -1 {
					t.Fatalf("error with span %d, %d", start, end)
				}
				return
			}
			if err != nil || start != tc.start || end != tc.end {
				t.Fatalf("got %d, %d, %v; want %d, %d", start, end, err, tc.start, tc.end)
			}
		})
	}
}

// TestFieldSpanMessages finds the fields of real messages and replaces
// them, as shard replay does.
func TestFieldSpanMessages(t *testing.T) {
	data := encodeFixture(t, 50, 8, true)
	d := NewDecoder(bytes.NewReader(data))
	batches := 0
	for m, err := d.Next(); !errors.Is(err, io.EOF); m, err = d.Next() {
		if err != nil {
			t.Fatal(err)
		}
		raw := m.Raw
		switch m.Type {
		case TypeBatch:
			batches++
			seq := intField(t, raw, "seq")
			if size := intField(t, raw, "size"); seq != m.Batch.Meta.Seq || size != int64(m.Batch.Size) {
				t.Fatalf("batch %d: seq %d, size %d", m.Batch.Meta.Seq, seq, size)
			}
			start, end, _ := FieldSpan(raw, "seq")
			re := mp(raw[:start], AppendInt(nil, 70000), raw[end:])
			m2, err := NewDecoder(bytes.NewReader(re)).Next()
			if err != nil || m2.Batch.Meta.Seq != 70000 || m2.Batch.Size != m.Batch.Size || len(m2.Batch.Columns) != len(m.Batch.Columns) {
				t.Fatalf("batch %d renumbered: %v", m.Batch.Meta.Seq, err)
			}
		case TypeHeader:
			start, end, err := FieldSpan(raw, "share")
			if err != nil || start < 0 {
				t.Fatalf("header share: %d, %v", start, err)
			}
			if !bytes.Equal(raw[start:end], AppendShare(nil, m.Header.Share)) {
				t.Fatal("AppendShare differs from the header's share")
			}
			sh := Share{Rank: 2, WorldSize: 3, Worker: 1, NumWorkers: 300}
			h := *m.Header
			h.Share = sh
			want, err := AppendHeader(nil, h)
			if err != nil {
				t.Fatal(err)
			}
			if got := mp(raw[:start], AppendShare(nil, sh), raw[end:]); !bytes.Equal(got, want) {
				t.Fatal("header with a replaced share differs from the header encoded with it")
			}
		}
		if s, e, err := FieldSpan(raw, "no such key"); err != nil || s != -1 || e != -1 {
			t.Fatalf("%s message: absent key: %d, %d, %v", m.Type, s, e, err)
		}
		for _, cut := range []int{0, 1, len(raw) / 2} {
			if _, _, err := FieldSpan(raw[:cut], "no such key"); !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s message cut at %d: %v", m.Type, cut, err)
			}
		}
	}
	if batches != 6 {
		t.Fatalf("%d batches", batches)
	}
}

func intField(t *testing.T, msg []byte, key string) int64 {
	t.Helper()
	start, end, err := FieldSpan(msg, key)
	if err != nil || start < 0 {
		t.Fatalf("%s: %d, %v", key, start, err)
	}
	v, err := ParseInt(msg[start:end])
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func TestParseInt(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, -40000, -1 << 31, -1<<31 - 1, -1 << 40, math.MinInt64} {
		b := AppendInt(nil, v)
		if got, err := ParseInt(b); err != nil || got != v {
			t.Errorf("%d (% x): %d, %v", v, b, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want int64
		err  bool // wraps ErrMalformed
		cut  bool // and io.ErrUnexpectedEOF
	}{
		{name: "wide uint 8", b: []byte{0xcc, 0x05}, want: 5},
		{name: "wide int 64", b: []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 0x2a}, want: 42},
		{name: "int 8", b: []byte{0xd0, 0x80}, want: -128},
		{name: "uint 16", b: []byte{0xcd, 0xff, 0xff}, want: 65535},
		{name: "int 16", b: []byte{0xd1, 0xff, 0xfe}, want: -2},
		{name: "int 32", b: []byte{0xd2, 0x80, 0, 0, 0}, want: math.MinInt32},
		{name: "empty", b: nil, err: true, cut: true},
		{name: "uint 32 cut", b: []byte{0xce, 0, 1}, err: true, cut: true},
		{name: "int 64 cut", b: []byte{0xd3}, err: true, cut: true},
		{name: "uint 64 above MaxInt64", b: []byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, err: true},
		{name: "trailing byte", b: []byte{0x05, 0x06}, err: true},
		{name: "trailing after uint 8", b: []byte{0xcc, 0x05, 0xc0}, err: true},
		{name: "str", b: mpStr(nil, "5"), err: true},
		{name: "float", b: mpFloat64(nil, 5), err: true},
		{name: "nil", b: []byte{0xc0}, err: true},
		{name: "reserved", b: []byte{0xc1}, err: true},
	} {
		got, err := ParseInt(tc.b)
		if tc.err {
			if !errors.Is(err, ErrMalformed) || errors.Is(err, io.ErrUnexpectedEOF) != tc.cut {
				t.Errorf("%s: %d, %v; want an error (cut: %v)", tc.name, got, err, tc.cut)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestAppendShare: the share map is what the header carries, decoded back
// by the Decoder.
func TestAppendShare(t *testing.T) {
	for _, sh := range []Share{{}, {Rank: 1, WorldSize: 2, Worker: 3, NumWorkers: 4}, {Rank: 200, WorldSize: 70000, Worker: 1 << 20, NumWorkers: 1 << 33}} {
		msg := mp([]byte{0x82}, mpStr(nil, "type"), mpStr(nil, TypeHeader), mpStr(nil, "share"), AppendShare(nil, sh))
		start, end, err := FieldSpan(msg, "share")
		if err != nil || end != len(msg) {
			t.Fatalf("%+v: %d, %d, %v", sh, start, end, err)
		}
		v, err := (&Decoder{r: bytes.NewReader(msg[start:end])}).value(0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := headerFromMap(schema.Map{Keys: []string{"share"}, Values: []any{v}})
		if err != nil || got.Share != sh {
			t.Fatalf("%+v: decoded %+v, %v", sh, got.Share, err)
		}
	}
}

// fixtureMessages splits a fixture stream into its messages (fuzz seeds).
func fixtureMessages(f *testing.F) [][]byte {
	var msgs [][]byte
	for rest := encodeFixture(f, 20, 8, true); len(rest) > 0; {
		_, n, err := SplitMessage(rest)
		if err != nil {
			f.Fatal(err)
		}
		msgs = append(msgs, rest[:n])
		rest = rest[n:]
	}
	return msgs
}

func FuzzFieldSpan(f *testing.F) {
	for _, msg := range fixtureMessages(f) {
		f.Add(msg, "seq")
		f.Add(msg[:len(msg)/2], "size")
	}
	f.Add([]byte{0x81, 0xa3, 's', 'e', 'q', 0xcd, 1}, "seq")
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}, "seq")
	f.Add([]byte{0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff}, "seq")
	f.Fuzz(func(t *testing.T, msg []byte, key string) {
		start, end, err := FieldSpan(msg, key)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || start != -1 || end != -1 {
				t.Fatalf("error %v with span %d, %d", err, start, end)
			}
			return
		}
		if start == -1 && end == -1 {
			return
		}
		if start < 1 || end <= start || end > len(msg) {
			t.Fatalf("span %d, %d of a %d-byte message", start, end, len(msg))
		}
		// The span is one whole value.
		s := skimmer{b: msg[start:end]}
		if err := s.skip(0); err != nil || s.pos != end-start {
			t.Fatalf("span %d, %d is not one value: %v", start, end, err)
		}
		ParseInt(msg[start:end]) // must not panic either
	})
}

// FuzzNextRawSplitMessage: the streaming walk (NextRaw) and the in-memory
// one (SplitMessage) accept the same messages and find the same type and
// length.
func FuzzNextRawSplitMessage(f *testing.F) {
	for _, msg := range fixtureMessages(f) {
		f.Add(msg)
		f.Add(msg[:len(msg)/2])
	}
	f.Add([]byte{0x81, 0xa4, 't', 'y', 'p', 'e', 0xa3, 'e', 'n', 'd'})
	f.Add([]byte{0x82, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xc6, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, n, err := SplitMessage(b)
		rtyp, raw, rerr := NewDecoder(bytes.NewReader(b)).NextRaw()
		if (err == nil) != (rerr == nil) || errors.Is(err, io.EOF) != errors.Is(rerr, io.EOF) {
			t.Fatalf("SplitMessage: %v; NextRaw: %v", err, rerr)
		}
		if err == nil && (typ != rtyp || !bytes.Equal(b[:n], raw)) {
			t.Fatalf("SplitMessage: %q, %d bytes; NextRaw: %q, %d bytes", typ, n, rtyp, len(raw))
		}
	})
}
