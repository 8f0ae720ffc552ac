package render

import "testing"

// BenchmarkDigest measures one selection digest (blake2b, 8-byte digest).
func BenchmarkDigest(b *testing.B) {
	r, _ := Load([]byte(`{"messages": [{"role": "user", "content": "x", "stream": "low_level"}]}`), "d")
	ep, _ := r.Episode(nil)
	b.ReportAllocs()
	var s uint64
	for i := 0; i < b.N; i++ {
		s += ep.digest("task_aug:", int64(i)*7919)
	}
	_ = s
}
