package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
)

// TestPagePathMatchesColumnReader reads conformance, real and generated
// datasets with and without the page path (pages.go) and requires
// identical batches.
func TestPagePathMatchesColumnReader(t *testing.T) {
	var counts readCounts
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred} {
		dirs = append(dirs, generated(t, v, 6, 150, 400, 5))
	}
	for _, dir := range dirs {
		_, pages := readAll(t, mustDir(t, dir), Selection{}, Options{counts: &counts})
		_, cols := readAll(t, mustDir(t, dir), Selection{}, Options{noPages: true})
		_, arrowPages := readAll(t, mustDir(t, dir), Selection{}, Options{noRawPages: true})
		if !reflect.DeepEqual(pages, cols) || !reflect.DeepEqual(pages, arrowPages) {
			t.Fatalf("%s: batches differ", dir)
		}
	}
	if counts.pages.Load() == 0 {
		t.Fatal("the page path was never used")
	}
	t.Logf("%d leaves read by the page path", counts.pages.Load())
}

// readVariant reads the episodes 5-9 of the inferred conformance dataset
// with data file file-001 replaced by data; it returns the batches and the
// errors.
func readVariant(t *testing.T, base fstest.MapFS, data []byte, opts Options) ([]*Batch, []string) {
	ctx := context.Background()
	fsys := fstest.MapFS{}
	for k, v := range base {
		fsys[k] = v
	}
	fsys["data/chunk-000/file-001.parquet"] = &fstest.MapFile{Data: data}
	src := fetch.NewFS("sweep", fsys)
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := ParseSelection("5-9", "")
	units, err := Plan(ctx, src, ds, sel)
	if err != nil {
		return nil, []string{"plan: " + err.Error()}
	}
	var bs []*Batch
	var errs []string
	for _, u := range units {
		b, err := ReadUnit(ctx, src, ds, u, opts)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		bs = append(bs, b)
	}
	return bs, errs
}

// TestPagePathCorruption flips bytes across a small data file and requires
// the same outcome (the same batches and the same errors) with and without
// the page path: the page path must reject what it does not fully
// understand and leave it to the column reader.
func TestPagePathCorruption(t *testing.T) {
	base, dir := fuzzBase(t)
	seed := smallDataFile(t, dir)
	stride := 29 // stride 3 (18k files) agreed too, in about two minutes
	if testing.Short() {
		stride = 211
	}
	n := 0
	for i := 0; i < len(seed); i += stride {
		for _, x := range []byte{0xff, 0x01, 0x10} {
			d := append([]byte(nil), seed...)
			d[i] ^= x
			ab, ae := readVariant(t, base, d, Options{})
			bb, be := readVariant(t, base, d, Options{noPages: true})
			if !reflect.DeepEqual(ae, be) || !reflect.DeepEqual(ab, bb) {
				t.Fatalf("byte %d ^ %#x: page path %q, column reader %q, or batches differ", i, x, ae, be)
			}
			n++
		}
	}
	t.Logf("%d corrupted files agree", n)
}

// layoutVariants rewrites data file file-001 of the inferred conformance
// dataset with other page layouts (data page v2, no dictionary, small
// pages, codecs) and returns them by name, with the dataset's base files.
func layoutVariants(t testing.TB) (fstest.MapFS, map[string][]byte) {
	base, dir := fuzzBase(t)
	f, err := file.OpenParquetFile(filepath.Join(dir, "data/chunk-000/file-001.parquet"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr, _ := pqarrow.NewFileReader(f, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	v2 := parquet.WithDataPageVersion(parquet.DataPageV2)
	small := []parquet.WriterProperty{parquet.WithDataPageSize(64), parquet.WithBatchSize(5)}
	out := map[string][]byte{}
	for name, props := range map[string][]parquet.WriterProperty{
		"v2":                    {v2},
		"plain":                 {parquet.WithDictionaryDefault(false)},
		"v2 plain":              {v2, parquet.WithDictionaryDefault(false)},
		"small pages":           {parquet.WithDataPageSize(64), parquet.WithBatchSize(7)},
		"v2 small pages snappy": append([]parquet.WriterProperty{v2, parquet.WithCompression(compress.Codecs.Snappy)}, small...),
		"small dictionaries":    {parquet.WithDictionaryPageSizeLimit(16), parquet.WithDataPageSize(64), parquet.WithBatchSize(3)},
		"zstd":                  {parquet.WithCompression(compress.Codecs.Zstd)},
		"v2 small pages zstd":   append([]parquet.WriterProperty{v2, parquet.WithCompression(compress.Codecs.Zstd)}, small...),
		"gzip small pages":      append([]parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Gzip)}, small...),
		"uncompressed":          {parquet.WithCompression(compress.Codecs.Uncompressed)},
		"v2 uncompressed":       {v2, parquet.WithCompression(compress.Codecs.Uncompressed)},
		"snappy, no statistics": {parquet.WithCompression(compress.Codecs.Snappy), parquet.WithStats(false)},
	} {
		var buf bytes.Buffer
		props = append([]parquet.WriterProperty{parquet.WithStats(true)}, props...)
		props = append(props, parquet.WithMaxRowGroupLength(4))
		if err := pqarrow.WriteTable(tbl, &buf, 1<<20, parquet.NewWriterProperties(props...),
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
			t.Fatal(err)
		}
		out[name] = buf.Bytes()
	}
	return base, out
}

// TestPagePathLayouts requires the same batches with and without the page
// path, and with arrow-go's page reader, for every layout variant.
func TestPagePathLayouts(t *testing.T) {
	base, variants := layoutVariants(t)
	var counts readCounts
	for name, data := range variants {
		ab, ae := readVariant(t, base, data, Options{counts: &counts})
		bb, be := readVariant(t, base, data, Options{noPages: true})
		cb, ce := readVariant(t, base, data, Options{noRawPages: true})
		if len(ab) == 0 || len(ae) > 0 || !reflect.DeepEqual(ae, be) || !reflect.DeepEqual(ab, bb) ||
			!reflect.DeepEqual(ae, ce) || !reflect.DeepEqual(ab, cb) {
			t.Fatalf("%s: %d batches, errors %q, %q and %q, or batches differ", name, len(ab), ae, be, ce)
		}
	}
	if counts.pages.Load() == 0 {
		t.Fatal("the page path was never used")
	}
}

// encodeHybrid is a reference encoder of the RLE / bit-packing hybrid:
// it alternates RLE runs and bit-packed runs at random.
func encodeHybrid(vals []uint32, bw int, rng *rand.Rand) []byte {
	var out []byte
	uvarint := func(x uint64) {
		for x >= 0x80 {
			out = append(out, byte(x)|0x80)
			x >>= 7
		}
		out = append(out, byte(x))
	}
	byteW := (bw + 7) / 8
	for i := 0; i < len(vals); {
		if rng.IntN(2) == 0 { // RLE run of equal values
			j := i + 1
			for j < len(vals) && vals[j] == vals[i] {
				j++
			}
			uvarint(uint64(j-i) << 1)
			for b := 0; b < byteW; b++ {
				out = append(out, byte(vals[i]>>(8*b)))
			}
			i = j
			continue
		}
		groups := 1 + rng.IntN(4)
		uvarint(uint64(groups)<<1 | 1)
		var acc uint64
		have := 0
		for k := 0; k < groups*8; k++ {
			var v uint32
			if i+k < len(vals) {
				v = vals[i+k]
			}
			acc |= uint64(v) << have
			have += bw
			for have >= 8 {
				out = append(out, byte(acc))
				acc >>= 8
				have -= 8
			}
		}
		i += groups * 8
	}
	return out
}

func TestDecodeHybrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bw := range []int{0, 1, 2, 3, 5, 8, 12, 16, 17, 31, 32} {
		for trial := 0; trial < 50; trial++ {
			n := 1 + rng.IntN(300)
			long := trial%5 == 0 // long runs (filled by doubling copies)
			if long {
				n = 1 + rng.IntN(3000)
			}
			vals := make([]uint32, n)
			maxV := uint64(1)<<bw - 1
			for i := range vals {
				if i > 0 && (rng.IntN(3) > 0 || long && rng.IntN(200) > 0) {
					vals[i] = vals[i-1]
				} else {
					vals[i] = uint32(rng.Uint64N(maxV + 1))
				}
			}
			src := encodeHybrid(vals, bw, rng)
			got := make([]int32, n)
			if bw < 32 {
				if !decodeHybrid(src, bw, got, maxV) {
					t.Fatalf("bw %d: decode failed", bw)
				}
				for i := range vals {
					if uint32(got[i]) != vals[i] {
						t.Fatalf("bw %d: value %d: got %d, want %d", bw, i, got[i], vals[i])
					}
				}
			}
			if bw <= 15 {
				got16 := make([]int16, n)
				if !decodeHybrid(src, bw, got16, maxV) {
					t.Fatalf("bw %d: int16 decode failed", bw)
				}
				for i := range vals {
					if uint32(got16[i]) != vals[i] {
						t.Fatalf("bw %d: int16 value %d differs", bw, i)
					}
				}
			}
			// Truncations and a lower bound on values fail cleanly.
			for cut := 0; cut < len(src); cut += 1 + len(src)/7 {
				decodeHybrid(src[:cut], bw, got, maxV)
			}
			if maxV > 0 && decodeHybrid(src, bw, got, 0) && slicesMax(vals) > 0 {
				t.Fatalf("bw %d: value above max accepted", bw)
			}
		}
	}
	// Random bytes never panic.
	for trial := 0; trial < 2000; trial++ {
		src := make([]byte, rng.IntN(40))
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		decodeHybrid(src, rng.IntN(34)-1, make([]int16, rng.IntN(100)), 3)
	}
}

func slicesMax(v []uint32) uint32 {
	m := uint32(0)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func TestPoolAllocator(t *testing.T) {
	a := new(poolAllocator)
	for _, size := range []int{0, 1, 63, 64, 65, 1000, 16384, 1 << 23} {
		for range 3 {
			b := a.Allocate(size)
			if len(b) != size {
				t.Fatalf("Allocate(%d): len %d", size, len(b))
			}
			for i := range b {
				if b[i] != 0 {
					t.Fatalf("Allocate(%d): byte %d not zero", size, i)
				}
				b[i] = 0xff
			}
			b = b[:cap(b)]
			for i := range b {
				b[i] = 0xff
			}
			b = b[:size]
			g := a.Reallocate(size+10, b)
			for i := range g {
				if want := byte(0xff); i >= size && g[i] != 0 || i < size && g[i] != want {
					t.Fatalf("Reallocate(%d -> %d): byte %d is %#x", size, size+10, i, g[i])
				}
			}
			a.Free(g)
		}
	}
}

// TestLevelCache checks that a run decoded once is copied for a later
// page with the same bytes, position, bit width and maximum, and decoded
// afresh otherwise.
func TestLevelCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var vals []uint32
	for len(vals) < 400 {
		vals = append(vals, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1)
	}
	src := encodeHybrid(vals, 1, rng)
	if len(src) < minCachedRun {
		t.Fatalf("test run of %d bytes is too short to be cached", len(src))
	}
	var c levelCache
	first := make([]int16, len(vals))
	if !c.decode(src, 1, first, 1, 0) || len(c.runs) != 1 {
		t.Fatalf("first decode: %d runs", len(c.runs))
	}
	again := make([]int16, len(vals))
	if !c.decode(bytes.Clone(src), 1, again, 1, 0) || len(c.runs) != 1 || !slices.Equal(first, again) {
		t.Fatalf("same run: %d runs, %v", len(c.runs), again)
	}
	for name, try := range map[string]func([]int16) bool{
		"other position": func(d []int16) bool { return c.decode(src, 1, d, 1, 7) },
		"other maximum":  func(d []int16) bool { return c.decode(src, 1, d, 3, 0) },
		"other bytes":    func(d []int16) bool { return c.decode(encodeHybrid(vals[1:], 1, rng), 1, d[:len(d)-1], 1, 0) },
	} {
		n := len(c.runs)
		d := make([]int16, len(vals))
		if !try(d) || len(c.runs) != n+1 {
			t.Errorf("%s: not decoded afresh", name)
		}
	}
	// A value above the maximum is refused, also after a cached decode
	// of the same bytes under a higher maximum.
	if c.decode(src, 1, make([]int16, len(vals)), 0, 0) {
		t.Error("a value above the maximum was accepted")
	}
	// The cache keeps its own copy: changing a decoded buffer does not
	// change what a later hit copies.
	clear(first)
	later := make([]int16, len(vals))
	if !c.decode(src, 1, later, 1, 0) || !slices.Equal(later, again) {
		t.Fatalf("hit after the first buffer changed: %v", later)
	}
	c.reset()
	if len(c.runs) != 0 || len(c.enc) != 0 || len(c.dec) != 0 {
		t.Fatal("reset left runs")
	}
	var none *levelCache
	got := make([]int16, len(vals))
	if !none.decode(src, 1, got, 1, 0) || !slices.Equal(got, again) {
		t.Fatal("a nil cache does not decode")
	}
}

// TestFixedListLen checks the recognition of lists of one length.
func TestFixedListLen(t *testing.T) {
	for _, c := range []struct {
		rep   []int16
		nrows int64
		want  int64
	}{
		{[]int16{0, 1, 1, 0, 1, 1}, 2, 3},
		{[]int16{0, 0, 0}, 3, 1},
		{[]int16{0, 1, 0, 1, 1}, 2, 0},    // lengths 2 and 3
		{[]int16{0, 1, 1, 0, 1, 1}, 3, 0}, // not nrows lists
		{[]int16{0, 1, 1, 1, 0, 1}, 2, 0}, // lengths 4 and 2
		{[]int16{1, 0}, 1, 0},
		{nil, 0, 0},
	} {
		if got := fixedListLen(c.rep, c.nrows); got != c.want {
			t.Errorf("%v (%d rows): %d, want %d", c.rep, c.nrows, got, c.want)
		}
	}
}

// refDecodeHybrid is a plain reference decoder of the RLE / bit-packing
// hybrid: one bit at a time, no shortcuts.
func refDecodeHybrid(src []byte, bw int, n int, limit uint64) ([]uint64, bool) {
	var out []uint64
	pos := 0
	for len(out) < n {
		h, k := binary.Uvarint(src[pos:])
		if k <= 0 {
			return nil, false
		}
		pos += k
		if h&1 == 0 {
			cnt := h >> 1
			byteW := (bw + 7) / 8
			if cnt == 0 || len(src)-pos < byteW {
				return nil, false
			}
			var v uint64
			for b := 0; b < byteW; b++ {
				v |= uint64(src[pos+b]) << (8 * b)
			}
			pos += byteW
			if v > limit {
				return nil, false
			}
			for i := uint64(0); i < cnt && len(out) < n; i++ {
				out = append(out, v)
			}
			continue
		}
		groups := h >> 1
		if groups == 0 || (bw > 0 && groups > uint64((len(src)-pos)/bw)) {
			return nil, false
		}
		take := n - len(out) // values wanted from this run (groups*8 may overflow when bw is 0)
		if groups < uint64(take+7)/8 {
			take = int(groups) * 8
		}
		bit := pos * 8
		for i := 0; i < take; i++ {
			var v uint64
			for b := 0; b < bw; b++ {
				if src[(bit+i*bw+b)/8]>>((bit+i*bw+b)%8)&1 == 1 {
					v |= 1 << b
				}
			}
			if v > limit {
				return nil, false
			}
			out = append(out, v)
		}
		if bw > 0 {
			pos += int(groups) * bw
		}
	}
	return out, true
}

// FuzzDecodeHybrid compares decodeHybrid with the reference decoder on
// arbitrary input: the same verdict, and the same values when both decode.
func FuzzDecodeHybrid(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, bw := range []int{1, 2, 3, 5, 8} {
		vals := make([]uint32, 40)
		for i := range vals {
			vals[i] = uint32(rng.IntN(1 << bw))
		}
		f.Add(encodeHybrid(vals, bw, rng), uint8(bw), uint16(len(vals)), uint32(1<<bw-1))
	}
	f.Fuzz(func(t *testing.T, src []byte, bw uint8, n uint16, limit uint32) {
		if bw > 16 {
			return
		}
		got := make([]int32, n)
		ok := decodeHybrid(src, int(bw), got, uint64(limit))
		want, wantOK := refDecodeHybrid(src, int(bw), int(n), uint64(limit))
		if ok != wantOK {
			t.Fatalf("decodeHybrid %v, reference %v", ok, wantOK)
		}
		if ok {
			for i := range got {
				if uint64(got[i]) != want[i] {
					t.Fatalf("value %d: %d, reference %d", i, got[i], want[i])
				}
			}
		}
	})
}
