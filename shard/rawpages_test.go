package shard

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/lrstream/lrstream/bench/datagen"
)

// comparePages reads every column chunk of the parquet file data with
// rawPages and with arrow-go's page reader and requires the same pages.
// It returns the number of chunks rawPages read.
func comparePages(t *testing.T, name string, data []byte) int {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	md := rdr.MetaData()
	view := &pageView{rdr: rdr, f: bytes.NewReader(data), size: int64(len(data)), raw: true}
	chunks := 0
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		for c := 0; c < md.Schema.NumColumns(); c++ {
			cc, err := md.RowGroup(rg).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			raw, ok := openRawPages(view.f, view.size, cc)
			if !ok {
				t.Fatalf("%s rg %d column %d: rawPages declined the chunk", name, rg, c)
			}
			pr, err := rdr.RowGroup(rg).GetColumnPageReader(c)
			if err != nil {
				t.Fatal(err)
			}
			ref := &arrowPages{pr: pr}
			for k := 0; ; k++ {
				a, b := raw.next(), ref.next()
				if (a == nil) != (b == nil) {
					t.Fatalf("%s rg %d column %d page %d: rawPages %v, arrow-go %v", name, rg, c, k, a != nil, b != nil)
				}
				if a == nil {
					break
				}
				if a.kind != b.kind || a.numValues != b.numValues || a.encoding != b.encoding || !bytes.Equal(a.data, b.data) ||
					(a.kind == dataPageV1 && (a.defEnc != b.defEnc || a.repEnc != b.repEnc)) ||
					(a.kind == dataPageV2 && (a.defLen != b.defLen || a.repLen != b.repLen)) {
					t.Fatalf("%s rg %d column %d page %d differs:\nraw   %+v\narrow %+v", name, rg, c, k,
						*a, *b)
				}
			}
			if raw.failed() || ref.failed() {
				t.Fatalf("%s rg %d column %d: failed (raw %v, arrow-go %v)", name, rg, c, raw.failed(), ref.failed())
			}
			raw.close()
			ref.close()
			chunks++
		}
	}
	return chunks
}

// TestRawPagesMatchArrow requires rawPages to yield exactly the pages of
// arrow-go's page reader, on every data file of the conformance and real
// datasets, on generated datasets and on every layout variant (page v2,
// plain, small pages, every codec).
func TestRawPagesMatchArrow(t *testing.T) {
	files := map[string][]byte{}
	dirs := append(conformanceDatasets(t), realDatasets(t)...)
	for _, v := range []datagen.Variant{datagen.VariantDocumented, datagen.VariantInferred, datagen.VariantInferredSorted, datagen.VariantJSONExt} {
		dirs = append(dirs, generated(t, v, 4, 100, 200, 9))
	}
	for _, dir := range dirs {
		paths, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.parquet"))
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files[p] = data
		}
	}
	_, variants := layoutVariants(t)
	for name, data := range variants {
		files[name] = data
	}
	chunks := 0
	for name, data := range files {
		chunks += comparePages(t, name, data)
	}
	t.Logf("%d column chunks of %d files read alike", chunks, len(files))
}

// TestRawPagesDeclines checks the chunks rawPages leaves to arrow-go:
// byte ranges outside the file, and unknown codecs.
func TestRawPagesDeclines(t *testing.T) {
	_, variants := layoutVariants(t)
	data := variants["zstd"]
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := rdr.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := openRawPages(bytes.NewReader(data), int64(len(data)), cc); !ok {
		t.Fatal("a zstd chunk was declined")
	}
	if _, ok := openRawPages(bytes.NewReader(data[:100]), 100, cc); ok {
		t.Fatal("a chunk beyond the end of the file was accepted")
	}
}

// TestRawPagesCorruptChunk feeds rawPages bit-flipped and truncated page
// streams: it must never panic, and a stream cut inside a page must fail
// while one cut between pages ends cleanly after the pages before the cut.
func TestRawPagesCorruptChunk(t *testing.T) {
	_, variants := layoutVariants(t)
	for _, name := range []string{"v2 small pages snappy", "small dictionaries", "v2 uncompressed", "gzip small pages"} {
		chunk, codec := firstChunk(t, variants[name], 1)
		// Page boundaries, from a clean read.
		ends := map[int]int{} // offset after page k -> k+1
		r := &rawPages{rest: chunk, codec: codec}
		for k := 1; r.next() != nil; k++ {
			ends[len(chunk)-len(r.rest)] = k
		}
		if r.failed() || len(ends) == 0 {
			t.Fatalf("%s: clean read failed or has %d pages", name, len(ends))
		}
		for i := 0; i < len(chunk); i++ {
			for _, x := range []byte{0xff, 0x01, 0x80} {
				c := bytes.Clone(chunk)
				c[i] ^= x
				r := &rawPages{rest: c, codec: codec}
				for k := 0; k < 10000 && r.next() != nil; k++ {
				}
			}
			r := &rawPages{rest: bytes.Clone(chunk[:i]), codec: codec}
			pages := 0
			for r.next() != nil {
				pages++
			}
			if k, boundary := ends[i]; boundary {
				if r.failed() || pages != k {
					t.Fatalf("%s: cut after page %d: %d pages, failed %v", name, k, pages, r.failed())
				}
			} else if i > 0 && !r.failed() {
				t.Fatalf("%s: cut inside a page at byte %d did not fail", name, i)
			}
		}
	}
}

// firstChunk returns the bytes and codec of column c of row group 0.
func firstChunk(t testing.TB, data []byte, c int) ([]byte, compress.Codec) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := rdr.MetaData().RowGroup(0).ColumnChunk(c)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := openRawPages(bytes.NewReader(data), int64(len(data)), cc)
	if !ok {
		t.Fatal("rawPages declined the chunk")
	}
	chunk, codec := bytes.Clone(raw.chunk), raw.codec
	raw.close()
	return chunk, codec
}

// FuzzParsePageHeader checks that the page header parser never panics,
// never reads beyond its input, and parses a header the same way twice.
func FuzzParsePageHeader(f *testing.F) {
	// Seeds: the first pages of chunks of layout variants (v1, v2,
	// dictionary pages, statistics).
	_, variants := layoutVariants(f)
	for _, name := range []string{"v2", "small dictionaries", "plain"} {
		for c := 0; c < 3; c++ {
			chunk, _ := firstChunk(f, variants[name], c)
			f.Add(chunk[:min(len(chunk), 200)])
		}
	}
	f.Add([]byte{0x15, 0x00, 0x15, 0x02, 0x15, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, ok := parsePageHeader(b)
		if !ok {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("header length %d of %d bytes", n, len(b))
		}
		h2, n2, ok2 := parsePageHeader(b[:n])
		if !ok2 || n2 != n || h2 != h {
			t.Fatalf("reparse of the header alone differs")
		}
	})
}
