package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/testkit"
	"github.com/lrstream/lrstream/schema"
)

// mustPlan opens src's dataset and plans every episode, failing t on an
// error.
func mustPlan(t testing.TB, src fetch.Source) (*schema.Dataset, []Unit) {
	t.Helper()
	ctx := context.Background()
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	units, err := Plan(ctx, src, ds, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	return ds, units
}

// repoRoot is the directory holding go.mod.
func repoRoot(t testing.TB) string { return testkit.ModuleRoot(t) }

func sharedDir(t testing.TB) string { return filepath.Join(repoRoot(t), "..", "shared") }

func conformanceDir(t testing.TB) string {
	if d := os.Getenv("LRSTREAM_CONFORMANCE_DATASETS"); d != "" {
		return d
	}
	return filepath.Join(sharedDir(t), "conformance", "datasets")
}

// conformanceDatasets lists the dataset directories of the conformance kit.
func conformanceDatasets(t testing.TB) []string {
	t.Helper()
	root := conformanceDir(t)
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Skipf("conformance datasets not available: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(root, e.Name(), "meta", "info.json")); err == nil {
				out = append(out, filepath.Join(root, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		t.Skipf("no conformance datasets in %s", root)
	}
	return out
}

func mustDir(t testing.TB, dir string) *fetch.Dir {
	t.Helper()
	src, err := fetch.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// readAll opens, plans and reads a whole dataset.
func readAll(t testing.TB, src fetch.Source, sel Selection, opts Options) (*schema.Dataset, []*Batch) {
	t.Helper()
	ctx := context.Background()
	ds, err := OpenDataset(ctx, src)
	if err != nil {
		t.Fatalf("OpenDataset: %v", err)
	}
	units, err := Plan(ctx, src, ds, sel)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	var out []*Batch
	for _, u := range units {
		b, err := ReadUnit(ctx, src, ds, u, opts)
		if err != nil {
			t.Fatalf("ReadUnit %s/%d: %v", u.File, u.RowGroup, err)
		}
		out = append(out, b)
	}
	return ds, out
}

// rowJSON renders a row the way decoded_*.jsonl files do.
func rowJSON(r schema.Row, persistent bool) string {
	var b strings.Builder
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		q, _ := json.Marshal(*p)
		return string(q)
	}
	role, _ := json.Marshal(r.Role)
	b.WriteString(`{"role":` + string(role) + `,"content":` + str(r.Content) + `,"style":` + str(r.Style))
	if persistent {
		if r.HasTimestamp {
			b.WriteString(`,"timestamp":` + strconv.FormatFloat(r.Timestamp, 'g', -1, 64))
		} else {
			b.WriteString(`,"timestamp":null`)
		}
	}
	b.WriteString(`,"camera":` + str(r.Camera) + `,"tool_calls":`)
	if r.ToolCalls == nil {
		b.WriteString("null")
	} else {
		b.Write(r.ToolCalls)
	}
	b.WriteString("}")
	return b.String()
}

func rowsJSON(rows []schema.Row, persistent bool) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = rowJSON(r, persistent)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// canonJSON re-encodes JSON text keeping object key order and writing
// numbers as float64, so that 6 and 6.0 compare equal but key order counts.
func canonJSON(t testing.TB, data []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b strings.Builder
	if err := canonValue(dec, &b); err != nil {
		t.Fatalf("invalid JSON %q: %v", data, err)
	}
	return b.String()
}

func canonValue(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			b.WriteByte('{')
			for n := 0; dec.More(); n++ {
				if n > 0 {
					b.WriteByte(',')
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				q, _ := json.Marshal(k)
				b.Write(q)
				b.WriteByte(':')
				if err := canonValue(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for n := 0; dec.More(); n++ {
				if n > 0 {
					b.WriteByte(',')
				}
				if err := canonValue(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte(']')
		}
	case string:
		q, _ := json.Marshal(v)
		b.Write(q)
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return err
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// generated writes a small generated dataset of variant v (episodes of
// minFrames to maxFrames frames, full annotation density) and returns its
// directory.
func generated(t testing.TB, v datagen.Variant, episodes, minFrames, maxFrames int, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	o := datagen.DefaultOptions()
	o.Episodes, o.MinFrames, o.MaxFrames, o.Variant, o.Seed = episodes, minFrames, maxFrames, v, seed
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeParquet writes rec as one parquet file with arrow-go's writer and
// returns its bytes (test fixtures: rewritten or tampered data files).
func writeParquet(t testing.TB, rec arrow.RecordBatch, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withFile is a copy of base with file name replaced by (or added as) data.
func withFile(base fstest.MapFS, name string, data []byte) fstest.MapFS {
	fsys := maps.Clone(base)
	if fsys == nil {
		fsys = fstest.MapFS{}
	}
	fsys[name] = &fstest.MapFile{Data: data}
	return fsys
}
