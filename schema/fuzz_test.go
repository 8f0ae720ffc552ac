package schema

import "testing"

func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(`{"codebase_version":"v3.0","fps":30,"features":{"action":{"dtype":"float32","shape":[6]}},"data_path":"data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"}`))
	f.Add([]byte(`{"features":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInfo(b)
		if err != nil {
			return
		}
		for _, ft := range in.Features {
			_ = ft.IsNumeric()
		}
		_, _ = in.DataFile(0, 0)
	})
}

func FuzzParseToolList(f *testing.F) {
	f.Add([]byte(`[{"type":"function","function":{"name":"say","parameters":{"type":"object"}}}]`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseToolList(b)
	})
}
