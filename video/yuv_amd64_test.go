package video

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestYUVRowAsm calls each assembly row function directly — not through
// rowPairFast's dispatch — on 1 to 3 whole blocks of its rows (one row for
// SSE2; two for AVX2, stride bytes apart with a gap after the blocks), for
// every conversion, and compares them with the scalar row; every byte it
// must not write (the gap, after the last block) must stay untouched.
func TestYUVRowAsm(t *testing.T) {
	for _, tc := range []struct {
		name        string
		block, rows int
		avx2        bool
		call        func(r, g, b, ys, us, vs []byte, stride, blocks int, k *[7][16]int16)
	}{
		{"sse2", 16, 1, false, func(r, g, b, ys, us, vs []byte, _, blocks int, k *[7][16]int16) {
			yuvRowSSE2(&r[0], &g[0], &b[0], &ys[0], &us[0], &vs[0], blocks, k)
		}},
		{"avx2", 32, 2, true, func(r, g, b, ys, us, vs []byte, stride, blocks int, k *[7][16]int16) {
			yuvRowsAVX2(&r[0], &g[0], &b[0], &ys[0], &us[0], &vs[0], stride, blocks, k)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.avx2 && !cpu.X86.HasAVX2 {
				t.Skip("avx2 rows not tested: this CPU lacks AVX2 (cpu.X86.HasAVX2 false)")
			}
			rng := rand.New(rand.NewPCG(4, uint64(tc.block)))
			for _, name := range yuvNames() {
				conv := yuvByName(name)
				for blocks := 1; blocks <= 3; blocks++ {
					n := blocks * tc.block
					stride := n + 6
					size := (tc.rows-1)*stride + n
					ys, us, vs := make([]byte, size), make([]byte, n/2), make([]byte, n/2)
					for _, p := range [][]byte{ys, us, vs} {
						for i := range p {
							p[i] = byte(rng.Uint32())
						}
					}
					var want, got [3][]byte
					for c := range 3 {
						want[c] = make([]byte, size+8)
						got[c] = make([]byte, size+8)
						for i := range got[c] {
							want[c][i], got[c][i] = 0xa5, 0xa5
						}
					}
					for row := range tc.rows {
						o := row * stride
						conv.row(want[0][o:o+n], want[1][o:o+n], want[2][o:o+n], ys[o:o+n], us, vs)
					}
					tc.call(got[0], got[1], got[2], ys, us, vs, stride, blocks, &conv.vec)
					for c := range 3 {
						if p := firstDiff(got[c], want[c]); p >= 0 {
							t.Fatalf("%s, %d blocks: byte %d (row %d) channel %d: %#x, scalar %#x (0xa5: not to be written)", name, blocks, p, p/stride, c, got[c][p], want[c][p])
						}
					}
				}
			}
		})
	}
}
