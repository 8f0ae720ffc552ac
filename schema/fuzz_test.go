package schema

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseInfo checks meaning, not only the absence of panics: whatever
// ParseInfo accepts satisfies Info.Check's invariants (fps positive and
// finite, positive shapes, known dtypes, templates formatting to paths
// inside the dataset, non-negative totals, chunks_size > 0, v3).
func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(validInfo))
	f.Add([]byte(strings.Replace(validInfo, `"fps": 30`, `"fps": -30`, 1)))
	f.Add([]byte(`{"codebase_version":"v3.0","fps":30,"features":{"action":{"dtype":"float32","shape":[6]}},"data_path":"data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"}`))
	f.Add([]byte(`{"features":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInfo(b)
		if err != nil {
			return
		}
		if !(in.FPS > 0) || math.IsInf(in.FPS, 0) {
			t.Fatalf("accepted fps %v", in.FPS)
		}
		if in.ChunksSize <= 0 || in.TotalEpisodes < 0 || in.TotalFrames < 0 || in.TotalTasks < 0 {
			t.Fatalf("accepted chunks_size %d totals %d/%d/%d", in.ChunksSize, in.TotalEpisodes, in.TotalFrames, in.TotalTasks)
		}
		if !strings.HasPrefix(in.CodebaseVersion, "v3") {
			t.Fatalf("accepted codebase_version %q", in.CodebaseVersion)
		}
		for _, ft := range in.Features {
			if !KnownDType(ft.DType) && !ft.IsLanguage() {
				t.Fatalf("accepted dtype %q", ft.DType)
			}
			for _, d := range ft.Shape {
				if d <= 0 {
					t.Fatalf("accepted shape %v", ft.Shape)
				}
			}
			_ = ft.IsNumeric()
		}
		for _, c := range [][2]int64{{0, 0}, {3, 12345}} {
			p, err := in.DataFile(c[0], c[1])
			if err != nil || !SafeRelPath(p) || !strings.HasSuffix(p, ".parquet") {
				t.Fatalf("accepted data_path %q: DataFile = %q, %v", in.DataPath, p, err)
			}
			if in.VideoPath != "" {
				p, err := in.VideoFile("observation.images.top", c[0], c[1])
				if err != nil || !SafeRelPath(p) {
					t.Fatalf("accepted video_path %q: VideoFile = %q, %v", in.VideoPath, p, err)
				}
			}
		}
	})
}

func FuzzParseToolList(f *testing.F) {
	f.Add([]byte(`[{"type":"function","function":{"name":"say","parameters":{"type":"object"}}}]`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseToolList(b)
	})
}
