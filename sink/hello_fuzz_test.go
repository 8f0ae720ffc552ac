package sink

import (
	"bytes"
	"testing"
)

func FuzzReadHello(f *testing.F) {
	f.Add(AppendHello(nil, Hello{Worker: 1, NumWorkers: 3, WorldSize: 1}))
	f.Add(AppendHello(nil, Hello{Resume: "tok"}))
	f.Add(AppendHello(nil, Hello{NumWorkers: 2, WorldSize: 1, Position: &Position{Epoch: 1, Next: 3, Fingerprint: "f"}}))
	f.Add([]byte{0x80})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add(helloMap("num_workers", int64(1<<32), "world_size", int64(1<<32)))
	f.Add(helloMap("num_workers", int64(1<<62), "worker", int64(5)))
	f.Add(helloMap("rank", int64(-1<<63), "world_size", int64(3)))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHello(bytes.NewReader(b))
		if err != nil {
			return
		}
		// Anything accepted is a share the arithmetic holds: the global
		// consumer index and count neither overflow nor wrap.
		consumers := int64(h.NumWorkers) * int64(h.WorldSize)
		consumer := int64(h.Rank)*int64(h.NumWorkers) + int64(h.Worker)
		if consumers < 1 || consumers > MaxConsumers || consumer < 0 || consumer >= consumers {
			t.Fatalf("accepted share %+v (consumer %d of %d)", h, consumer, consumers)
		}
		if h.NumWorkers < 1 || h.Worker < 0 || h.Worker >= h.NumWorkers || h.WorldSize < 1 || h.Rank < 0 || h.Rank >= h.WorldSize {
			t.Fatalf("accepted invalid hello %+v", h)
		}
	})
}

func FuzzDecoder(f *testing.F) {
	f.Add(AppendEnd(nil, End{Frames: 3}))
	f.Add(AppendError(nil, "boom"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(bytes.NewReader(b))
		for i := 0; i < 100; i++ {
			if _, err := d.Next(); err != nil {
				return
			}
		}
	})
}
