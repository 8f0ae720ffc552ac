package pipeline

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lrstream/lrstream/render"
)

// rechunk copies dataset src to dst, rewriting every data file with row
// groups of rows frames, so that episodes span row groups. (arrow-go's
// writer mangles fixed_size_list values when it re-slices chunked input,
// so numeric checks must compare with the rewritten files, not src.)
func rechunk(t *testing.T, src, dst string, rows int64) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			if rel == "expected" {
				return filepath.SkipDir
			}
			return os.MkdirAll(out, 0o755)
		}
		if !strings.HasPrefix(rel, "data"+string(filepath.Separator)) {
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			o, err := os.Create(out)
			if err != nil {
				return err
			}
			defer o.Close()
			_, err = io.Copy(o, in)
			return err
		}
		r, err := file.OpenParquetFile(p, false)
		if err != nil {
			return err
		}
		defer r.Close()
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return err
		}
		defer tbl.Release()
		o, err := os.Create(out)
		if err != nil {
			return err
		}
		defer o.Close()
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(rows))
		return pqarrow.WriteTable(tbl, o, rows, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEpisodesAcrossRowGroups renders a dataset whose episodes span row
// groups (and, for the last episode of a file, nothing else) exactly like
// the original.
func TestEpisodesAcrossRowGroups(t *testing.T) {
	name := "pub_inferred_front_wrist"
	src := filepath.Join(conformanceDatasets(t), name)
	dst := t.TempDir()
	rechunk(t, src, dst, 17)
	rec, err := render.LoadFile(filepath.Join(sharedDir(t), "recipes", "subtask_mem_vqa_speech.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"drop", "step"} {
		want := readLines(t, filepath.Join(src, "expected", "subtask_mem_vqa_speech."+mode+".jsonl"))
		compareFrames(t, want, inspectLines(t, dst, rec, mode, 2))
	}
}
