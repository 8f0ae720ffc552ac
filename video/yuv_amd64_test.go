package video

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestYUVRowAsm calls each assembly row function directly — not through
// rowFast's dispatch — on 1 to 3 whole blocks of one row, for every
// conversion, and compares it with the scalar row; bytes after the blocks
// must stay untouched.
func TestYUVRowAsm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block int
		avx2  bool
		fn    func(r, g, b, ys, us, vs *byte, blocks int, k *[7][8]int16)
	}{
		{"sse2", 16, false, yuvRowSSE2},
		{"avx2", 32, true, yuvRowAVX2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.avx2 && !cpu.X86.HasAVX2 {
				t.Skip("avx2 row not tested: this CPU lacks AVX2 (cpu.X86.HasAVX2 false)")
			}
			rng := rand.New(rand.NewPCG(4, uint64(tc.block)))
			for _, name := range yuvNames() {
				conv := yuvByName(name)
				for blocks := 1; blocks <= 3; blocks++ {
					n := blocks * tc.block
					ys, us, vs := make([]byte, n), make([]byte, n/2), make([]byte, n/2)
					for _, p := range [][]byte{ys, us, vs} {
						for i := range p {
							p[i] = byte(rng.Uint32())
						}
					}
					want := make([][]byte, 3)
					got := make([][]byte, 3)
					for c := range 3 {
						want[c] = make([]byte, n)
						got[c] = make([]byte, n+8)
						for i := range got[c] {
							got[c][i] = 0xa5
						}
					}
					conv.row(want[0], want[1], want[2], ys, us, vs)
					tc.fn(&got[0][0], &got[1][0], &got[2][0], &ys[0], &us[0], &vs[0], blocks, &conv.vec)
					for c := range 3 {
						if p := firstDiff(got[c][:n], want[c]); p >= 0 {
							t.Fatalf("%s, %d blocks: pixel %d channel %d: %d, scalar %d", name, blocks, p, c, got[c][p], want[c][p])
						}
						for i, v := range got[c][n:] {
							if v != 0xa5 {
								t.Fatalf("%s, %d blocks: channel %d: wrote byte %d past the blocks", name, blocks, c, i)
							}
						}
					}
				}
			}
		})
	}
}
