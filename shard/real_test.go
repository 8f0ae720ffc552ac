package shard

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/lrstream/lrstream/internal/testkit"
)

func realDatasets(t testing.TB) []string {
	root := filepath.Join(sharedDir(t), "datasets", "real")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Skipf("real datasets not available: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out
}

// fileFeature reads one column of a whole parquet file independently of
// ReadUnit (whole-table read) and flattens it to little-endian float32
// bytes.
func fileFeatureF32(t *testing.T, path, col string) []byte {
	t.Helper()
	tbl := testkit.ReadTable(t, path)
	defer tbl.Release()
	var out bytes.Buffer
	for i := 0; i < int(tbl.NumCols()); i++ {
		if tbl.Schema().Field(i).Name != col {
			continue
		}
		for _, ch := range tbl.Column(i).Data().Chunks() {
			for r := 0; r < ch.Len(); r++ {
				var vals arrow.Array
				var b, e int
				switch l := ch.(type) {
				case *array.List:
					vals = l.ListValues()
					s, en := l.ValueOffsets(r)
					b, e = int(s), int(en)
				case *array.FixedSizeList:
					vals = l.ListValues()
					n := int(l.DataType().(*arrow.FixedSizeListType).Len())
					b, e = (l.Offset()+r)*n, (l.Offset()+r+1)*n
				default:
					t.Fatalf("unexpected type %s", ch.DataType())
				}
				fl := vals.(*array.Float32)
				for k := b; k < e; k++ {
					binary.Write(&out, binary.LittleEndian, math.Float32bits(fl.Value(k)))
				}
			}
		}
		return out.Bytes()
	}
	t.Fatalf("no column %s in %s", col, path)
	return nil
}

// TestRealDatasets reads the real LeRobot datasets completely and checks
// every frame and every numeric feature value against the parquet files.
func TestRealDatasets(t *testing.T) {
	for _, dir := range realDatasets(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ds, batches := readAll(t, mustDir(t, dir), Selection{}, Options{})
			var feats []string
			for _, f := range ds.Info.Features {
				if f.IsNumeric() && !isCore(f.Name) {
					feats = append(feats, f.Name)
				}
			}
			if len(feats) == 0 {
				t.Fatal("no numeric features")
			}
			frames := 0
			got := map[string]map[string]*bytes.Buffer{} // file → feature → bytes
			next := int64(0)
			for _, b := range batches {
				if b.HasPersistent || b.HasEvents {
					t.Errorf("%s: language columns reported on a dataset without them", b.File)
				}
				for i := 0; i < b.Len(); i++ {
					if b.Index[i] != next {
						t.Fatalf("frame %d has index %d", next, b.Index[i])
					}
					next++
					ep, ok := ds.Episode(b.EpisodeIndex[i])
					if !ok || b.Index[i] < ep.FromIndex || b.Index[i] >= ep.ToIndex {
						t.Fatalf("index %d outside its episode %d", b.Index[i], b.EpisodeIndex[i])
					}
					if b.FrameIndex[i] != b.Index[i]-ep.FromIndex {
						t.Fatalf("index %d: frame_index %d", b.Index[i], b.FrameIndex[i])
					}
					if _, ok := ds.TaskText(b.TaskIndex[i]); !ok {
						t.Fatalf("index %d: unknown task %d", b.Index[i], b.TaskIndex[i])
					}
				}
				frames += b.Len()
				if len(b.Features) != len(feats) {
					t.Fatalf("%d features, want %d", len(b.Features), len(feats))
				}
				for k, f := range b.Features {
					if f.Name != feats[k] || f.DType != "<f4" {
						t.Fatalf("feature %d: %s %s", k, f.Name, f.DType)
					}
					want, _ := ds.Info.Feature(f.Name)
					if len(f.Shape) != 1 || f.Shape[0] != want.Shape[0] || len(f.Data) != b.Len()*want.Shape[0]*4 {
						t.Fatalf("feature %s: shape %v, %d bytes for %d frames", f.Name, f.Shape, len(f.Data), b.Len())
					}
					if got[b.File] == nil {
						got[b.File] = map[string]*bytes.Buffer{}
					}
					if got[b.File][f.Name] == nil {
						got[b.File][f.Name] = &bytes.Buffer{}
					}
					got[b.File][f.Name].Write(f.Data)
				}
			}
			if int64(frames) != ds.Info.TotalFrames {
				t.Fatalf("read %d frames, info.json says %d", frames, ds.Info.TotalFrames)
			}
			if int64(len(ds.Episodes)) != ds.Info.TotalEpisodes {
				t.Fatalf("%d episodes, info.json says %d", len(ds.Episodes), ds.Info.TotalEpisodes)
			}
			for fileName, fs := range got {
				for feat, buf := range fs {
					want := fileFeatureF32(t, filepath.Join(dir, fileName), feat)
					if !bytes.Equal(buf.Bytes(), want) {
						t.Fatalf("%s %s: decoded values differ from the parquet file", fileName, feat)
					}
				}
			}
			t.Logf("%d frames, %d episodes, %d files, features %v", frames, len(ds.Episodes), len(got), feats)
		})
	}
}
