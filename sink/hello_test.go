package sink

import (
	"bytes"
	"strings"
	"testing"
)

// helloMap encodes a hello map with arbitrary integer values.
func helloMap(kv ...any) []byte {
	b := mpMapHeader(nil, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		b = mpStr(b, kv[i].(string))
		b = mpInt(b, kv[i+1].(int64))
	}
	return b
}

func TestReadHelloShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		want string // error substring; "" = accepted
	}{
		{"defaults", helloMap(), ""},
		{"worker 3 of 4, rank 1 of 2", helloMap("worker", int64(3), "num_workers", int64(4), "rank", int64(1), "world_size", int64(2)), ""},
		{"largest", helloMap("num_workers", int64(1024), "world_size", int64(1024), "worker", int64(1023), "rank", int64(1023)), ""},
		{"negative worker", helloMap("worker", int64(-1)), "worker -1 out of range"},
		{"worker = num_workers", helloMap("worker", int64(2), "num_workers", int64(2)), "worker 2 out of range"},
		{"rank = world_size", helloMap("rank", int64(4), "world_size", int64(4)), "rank 4 out of range"},
		{"zero workers", helloMap("num_workers", int64(0)), "num_workers must be >= 1"},
		{"negative world", helloMap("world_size", int64(-3)), "world_size must be >= 1"},
		{"2^32 x 2^32 wraps", helloMap("num_workers", int64(1<<32), "world_size", int64(1<<32)), "out of range"},
		{"2^62 workers", helloMap("num_workers", int64(1<<62)), "out of range"},
		{"-2^63 rank", helloMap("rank", int64(-1<<63)), "out of range"},
		{"product too large", helloMap("num_workers", int64(2048), "world_size", int64(1024)), "exceeds"},
		{"each fits, product not", helloMap("num_workers", int64(MaxConsumers), "world_size", int64(2)), "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHello(bytes.NewReader(tc.msg))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want an error containing %q", h, err, tc.want)
			}
		})
	}
}

// TestReadHelloSHM: the shm key is an arena size within [MinSHM, MaxSHM],
// and AppendHello writes what ReadHello reads.
func TestReadHelloSHM(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		shm  int64
		want string // error substring; "" = accepted
	}{
		{"absent", helloMap(), 0, ""},
		{"256 MiB", helloMap("shm", int64(256<<20)), 256 << 20, ""},
		{"smallest", helloMap("shm", int64(MinSHM)), MinSHM, ""},
		{"largest", helloMap("shm", int64(MaxSHM)), MaxSHM, ""},
		{"zero", helloMap("shm", int64(0)), 0, "hello shm is 0"},
		{"too small", helloMap("shm", int64(MinSHM-1)), 0, "want an arena size"},
		{"too large", helloMap("shm", int64(MaxSHM+1)), 0, "want an arena size"},
		{"negative", helloMap("shm", int64(-1)), 0, "want an arena size"},
		{"not a multiple of 4096", helloMap("shm", int64(MinSHM+64)), 0, "a multiple of 4096"},
		{"a string", append(append(mpMapHeader(nil, 1), mpStr(nil, "shm")...), mpStr(nil, "1MiB")...), 0, "want an arena size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHello(bytes.NewReader(tc.msg))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %+v, %v; want an error containing %q", h, err, tc.want)
				}
				return
			}
			if err != nil || h.SHM != tc.shm {
				t.Fatalf("got shm %d, %v; want %d", h.SHM, err, tc.shm)
			}
			back, err := ReadHello(bytes.NewReader(AppendHello(nil, h)))
			if err != nil || back != h {
				t.Fatalf("AppendHello round trip: %+v, %v; want %+v", back, err, h)
			}
		})
	}
}
