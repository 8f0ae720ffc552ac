package shard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/testkit"
)

func TestParseRanges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Ranges
		str  string
		err  bool
	}{
		{"", nil, "", false},
		{"  ", nil, "", false},
		{"3", Ranges{{3, 3}}, "3", false},
		{"0-9,12", Ranges{{0, 9}, {12, 12}}, "0-9,12", false},
		{" 12 , 0 - 9 ", Ranges{{0, 9}, {12, 12}}, "0-9,12", false},
		{"1-3,2-5,6,8", Ranges{{1, 6}, {8, 8}}, "1-6,8", false},
		{"5,4,3", Ranges{{3, 5}}, "3-5", false},
		{"9223372036854775807,0", Ranges{{0, 0}, {9223372036854775807, 9223372036854775807}}, "0,9223372036854775807", false},
		{"5-3", nil, "", true},
		{"-3", nil, "", true},
		{"3-", nil, "", true},
		{"1,,2", nil, "", true},
		{"a", nil, "", true},
		{"+1", nil, "", true},
		{"1-2-3", nil, "", true},
		{"99999999999999999999", nil, "", true},
	} {
		got, err := ParseRanges(c.in)
		if (err != nil) != c.err {
			t.Errorf("ParseRanges(%q) error = %v, want error %v", c.in, err, c.err)
			continue
		}
		if c.err {
			continue
		}
		if !reflect.DeepEqual(got, c.want) || got.String() != c.str {
			t.Errorf("ParseRanges(%q) = %v (%q), want %v (%q)", c.in, got, got.String(), c.want, c.str)
		}
	}
	sel, err := ParseSelection("0-9,12", "3-4")
	if err != nil {
		t.Fatal(err)
	}
	for ep, want := range map[int64]bool{0: true, 3: false, 4: false, 5: true, 9: true, 10: false, 12: true, 13: false} {
		if sel.Contains(ep) != want {
			t.Errorf("Contains(%d) = %v", ep, !want)
		}
	}
	if _, err := ParseSelection("x", ""); err == nil || !strings.Contains(err.Error(), "--episodes") {
		t.Errorf("bad --episodes: %v", err)
	}
	if _, err := ParseSelection("", "1-"); err == nil || !strings.Contains(err.Error(), "--exclude-episodes") {
		t.Errorf("bad --exclude-episodes: %v", err)
	}
}

func FuzzParseRanges(f *testing.F) {
	for _, s := range []string{"", "0-9,12", "1,2,3", "5-3", " 7 - 8 ,9", "9223372036854775807", "0-9223372036854775807,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRanges(s)
		if err != nil {
			return
		}
		for i, x := range r {
			if x.Lo > x.Hi || x.Lo < 0 {
				t.Fatalf("%q: bad range %v", s, x)
			}
			if i > 0 && r[i-1].Hi >= x.Lo-1 {
				t.Fatalf("%q: ranges not normalized: %v", s, r)
			}
		}
		r2, err := ParseRanges(r.String())
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("%q: round trip %q gave %v, %v", s, r.String(), r2, err)
		}
		for _, x := range r {
			if !r.Contains(x.Lo) || !r.Contains(x.Hi) {
				t.Fatalf("%q: Contains fails on bounds of %v", s, x)
			}
			if x.Lo > 0 && r.Contains(x.Lo-1) {
				t.Fatalf("%q: Contains(%d) true", s, x.Lo-1)
			}
		}
	})
}

// recordingSource records which files are opened, which byte ranges are
// read and which are prefetched.
type recordingSource struct {
	fetch.Source
	mu         sync.Mutex
	opened     map[string]int
	reads      map[string][]fetch.Range
	prefetched map[string][]fetch.Range
}

func newRecording(src fetch.Source) *recordingSource {
	return &recordingSource{Source: src, opened: map[string]int{}, reads: map[string][]fetch.Range{}, prefetched: map[string][]fetch.Range{}}
}

func (r *recordingSource) Open(ctx context.Context, name string) (fetch.File, error) {
	f, err := r.Source.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.opened[name]++
	r.mu.Unlock()
	return &recordingFile{File: f, src: r}, nil
}

func (r *recordingSource) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened, r.reads, r.prefetched = map[string]int{}, map[string][]fetch.Range{}, map[string][]fetch.Range{}
}

func (r *recordingSource) dataFilesOpened() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.opened {
		if strings.HasPrefix(n, "data/") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

type recordingFile struct {
	fetch.File
	src *recordingSource
}

func (f *recordingFile) ReadAt(p []byte, off int64) (int, error) {
	f.src.mu.Lock()
	f.src.reads[f.Name()] = append(f.src.reads[f.Name()], fetch.Range{Off: off, Len: int64(len(p))})
	f.src.mu.Unlock()
	return f.File.ReadAt(p, off)
}

func (f *recordingFile) Prefetch(ctx context.Context, rs []fetch.Range) error {
	f.src.mu.Lock()
	f.src.prefetched[f.Name()] = append(f.src.prefetched[f.Name()], rs...)
	f.src.mu.Unlock()
	return nil
}

func TestPlanSkipsFilesAndRowGroups(t *testing.T) {
	dir := filepath.Join(conformanceDir(t), "pub_inferred_front_wrist")
	if _, err := os.Stat(dir); err != nil {
		t.Skip(err)
	}
	rec := newRecording(mustDir(t, dir))
	ctx := context.Background()
	ds, err := OpenDataset(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}

	// Episode 3 is row group 3 of data/chunk-000/file-000.parquet.
	rec.reset()
	sel, _ := ParseSelection("3", "")
	units, err := Plan(ctx, rec, ds, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 1 || units[0].File != "data/chunk-000/file-000.parquet" || units[0].RowGroup != 3 || !reflect.DeepEqual(units[0].Episodes, []int64{3}) || units[0].Partial {
		t.Fatalf("units = %+v", units)
	}
	if got := rec.dataFilesOpened(); !reflect.DeepEqual(got, []string{"data/chunk-000/file-000.parquet"}) {
		t.Fatalf("Plan opened %v", got)
	}
	rec.reset()
	b, err := ReadUnit(ctx, rec, ds, units[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != int(ds.Episodes[3].Length) {
		t.Fatalf("%d frames, want %d", b.Len(), ds.Episodes[3].Length)
	}
	// Every data read falls inside the prefetched column chunks of row
	// group 3 (the footer was parsed by Plan and is not read again).
	name := units[0].File
	pre := rec.prefetched[name]
	if len(pre) == 0 {
		t.Fatal("nothing prefetched")
	}
	for _, r := range rec.reads[name] {
		inside := false
		for _, p := range pre {
			if r.Off >= p.Off && r.Off+r.Len <= p.Off+p.Len {
				inside = true
			}
		}
		if !inside && r.Len > 0 {
			t.Errorf("read [%d,+%d) outside the prefetched ranges %v", r.Off, r.Len, pre)
		}
	}
	ft := units[0].pq.footer
	for _, p := range pre {
		for rg := 0; rg < ft.numRowGroups(); rg++ {
			if rg == 3 {
				continue
			}
			for _, cc := range ft.rowGroup(rg).Columns {
				if off := cc.MetaData.DataPageOffset; off >= p.Off && off < p.Off+p.Len {
					t.Errorf("prefetch %v covers row group %d", p, rg)
				}
			}
		}
	}

	// Excluding episodes 0-19 leaves only the last file.
	rec.reset()
	sel, _ = ParseSelection("", "0-19")
	units, err = Plan(ctx, rec, ds, sel)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.dataFilesOpened(); !reflect.DeepEqual(got, []string{"data/chunk-002/file-000.parquet"}) {
		t.Fatalf("Plan opened %v", got)
	}
	if len(units) != 4 {
		t.Fatalf("%d units, want 4", len(units))
	}
	for i, u := range units {
		if u.Seq != i || !reflect.DeepEqual(u.Episodes, []int64{int64(20 + i)}) {
			t.Errorf("unit %d = %+v", i, u)
		}
	}

	// A selection matching nothing gives an empty plan; CheckSelection
	// reports it.
	sel, _ = ParseSelection("100-200", "")
	if units, err := Plan(ctx, rec, ds, sel); err != nil || len(units) != 0 {
		t.Fatalf("empty selection: %d units, %v", len(units), err)
	}
	if err := CheckSelection(ds, sel); err == nil || !strings.Contains(err.Error(), "100-200") {
		t.Fatalf("CheckSelection: %v", err)
	}
	if err := CheckSelection(ds, Selection{}); err != nil {
		t.Fatal(err)
	}
}

// copyDataset copies a dataset's meta/ and data/ into a temporary directory.
func copyDataset(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !strings.HasPrefix(rel, "meta") && !strings.HasPrefix(rel, "data") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// rewriteRowGroups rewrites a data file with row groups of n rows.
func rewriteRowGroups(t *testing.T, path string, n int64) {
	t.Helper()
	tbl := testkit.ReadTable(t, path)
	defer tbl.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithStats(true))
	if err := pqarrow.WriteTable(tbl, &buf, n, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPartialRowGroup reads one episode out of row groups that mix
// episodes.
func TestPartialRowGroup(t *testing.T) {
	dirs := realDatasets(t)
	var src string
	for _, d := range dirs {
		if strings.Contains(d, "record-test") {
			src = d
		}
	}
	if src == "" {
		t.Skip("record-test not available")
	}
	dir := copyDataset(t, src)
	rewriteRowGroups(t, filepath.Join(dir, "data/chunk-000/file-000.parquet"), 1000)
	ctx := context.Background()
	_, all := readAll(t, mustDir(t, dir), Selection{}, Options{})
	sel, _ := ParseSelection("1-2", "")
	ds, part := readAll(t, mustDir(t, dir), sel, Options{})
	if len(all) != 2 || len(part) != 2 {
		t.Fatalf("%d and %d units, want 2 and 2", len(all), len(part))
	}
	ep1, ep2 := ds.Episodes[1], ds.Episodes[2]
	frames := 0
	for k, b := range part {
		for i := 0; i < b.Len(); i++ {
			if e := b.EpisodeIndex[i]; e != 1 && e != 2 {
				t.Fatalf("frame of episode %d", e)
			}
		}
		frames += b.Len()
		// Values equal the full read, sliced to the kept frames.
		a := all[k]
		first := 0
		for a.Index[first] != b.Index[0] {
			first++
		}
		for fi, f := range b.Features {
			af := a.Features[fi]
			per := len(af.Data) / a.Len()
			if !bytes.Equal(f.Data, af.Data[first*per:(first+b.Len())*per]) {
				t.Fatalf("feature %s differs after filtering", f.Name)
			}
		}
	}
	if int64(frames) != ep1.Length+ep2.Length {
		t.Fatalf("%d frames, want %d", frames, ep1.Length+ep2.Length)
	}
	units, err := Plan(ctx, mustDir(t, dir), ds, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		if !u.Partial {
			t.Errorf("unit %+v not marked partial", u)
		}
	}
}

// BenchmarkOpenAndPlan measures the metadata layer: OpenDataset (info,
// tasks, episodes index) and Plan (every data file's footer) of a
// generated dataset of 300 short episodes.
func BenchmarkOpenAndPlan(b *testing.B) {
	src := mustDir(b, generated(b, datagen.VariantDocumented, 300, 20, 60, 11))
	ctx := context.Background()
	units := 0
	for b.Loop() {
		ds, err := OpenDataset(ctx, src)
		if err != nil {
			b.Fatal(err)
		}
		us, err := Plan(ctx, src, ds, Selection{})
		if err != nil {
			b.Fatal(err)
		}
		units = len(us)
	}
	b.ReportMetric(float64(units), "units")
}
