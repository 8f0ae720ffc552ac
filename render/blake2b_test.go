package render

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// reference is the 8-byte BLAKE2b digest of msg by x/crypto, read as a
// big-endian integer.
func reference(t testing.TB, msg []byte) uint64 {
	h, err := blake2b.New(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(msg)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// TestDigestShortMatchesXCrypto compares digestShort with x/crypto's
// BLAKE2b on messages of every length it takes (random bytes, all zero and
// all 0xff bytes) and on the renderer's own messages.
func TestDigestShortMatchesXCrypto(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for n := 0; n <= maxShortDigest; n++ {
		for trial := 0; trial < 300; trial++ {
			msg := make([]byte, n)
			for i := range msg {
				switch trial {
				case 0:
				case 1:
					msg[i] = 0xff
				default:
					msg[i] = byte(rng.Uint32())
				}
			}
			if got, want := digestShort(msg), reference(t, msg); got != want {
				t.Fatalf("%d bytes %x: %016x, want %016x", n, msg, got, want)
			}
		}
	}
	for _, prefix := range []string{"", "vqa:", "task_aug:"} {
		for _, idx := range []int64{0, 1, 9, 10, 99999, 1 << 40, -1, -9223372036854775808, 9223372036854775807} {
			msg := strconv.AppendInt([]byte(prefix), idx, 10)
			if got, want := digestShort(msg), reference(t, msg); got != want {
				t.Fatalf("%q: %016x, want %016x", msg, got, want)
			}
		}
	}
}

// TestDigestLongMessages checks the digest of messages too long for
// digestShort (x/crypto's path) against digestShort's neighbourhood.
func TestDigestLongMessages(t *testing.T) {
	r, _ := Load([]byte(`{"messages": [{"role": "user", "content": "x", "stream": "low_level"}]}`), "d")
	ep, err := r.Episode(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "task_aug:", "a prefix of more than thirty-two bytes:"} {
		for _, idx := range []int64{0, 123456789, -9223372036854775808} {
			msg := strconv.AppendInt([]byte(prefix), idx, 10)
			if got, want := ep.digest(prefix, idx), reference(t, msg); got != want {
				t.Fatalf("%q: %016x, want %016x", msg, got, want)
			}
		}
	}
}

// FuzzDigestShort compares digestShort with x/crypto on any message it
// takes.
func FuzzDigestShort(f *testing.F) {
	f.Add([]byte("task_aug:12345"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > maxShortDigest {
			msg = msg[:maxShortDigest]
		}
		if got, want := digestShort(msg), reference(t, msg); got != want {
			t.Fatalf("%x: %016x, want %016x", msg, got, want)
		}
	})
}

// TestGeneratedDigestUpToDate runs the generator and requires the
// committed blake2b_short.go to be its output.
func TestGeneratedDigestUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator")
	}
	out := filepath.Join(t.TempDir(), "gen.go")
	cmd := exec.Command("go", "run", "./internal/blake2bgen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("blake2b_short.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("blake2b_short.go is not the generator's output: run go generate ./render")
	}
}
