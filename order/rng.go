package order

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// rng is the deterministic random source of the orders. It uses the
// PCG-DXSM generator of math/rand/v2, whose output stream is fixed by its
// specification, and draws bounded integers with its own (Lemire) method,
// so orders never change with the Go version.
type rng struct{ pcg *rand.PCG }

// newRNG seeds a generator from the parts that define an order: a purpose
// label, the user's seed, the epoch, the dataset revision and the episode
// selection.
func newRNG(purpose string, seed uint64, epoch int64, revision, selection string) *rng {
	h := sha256.New()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(epoch))
	h.Write([]byte("lrstream-order/1\x00" + purpose + "\x00"))
	h.Write(b[:])
	h.Write([]byte(revision + "\x00" + selection))
	sum := h.Sum(nil)
	return &rng{rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16]))}
}

// intn returns a uniform integer in [0, n), n > 0.
func (r *rng) intn(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), bound)
		}
	}
	return int(hi)
}

// float returns a uniform float64 in [0, 1) (53 bits).
func (r *rng) float() float64 {
	return float64(r.pcg.Uint64()>>11) / (1 << 53)
}

// shuffle permutes s in place (Fisher-Yates).
func shuffle[T any](r *rng, s []T) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}
