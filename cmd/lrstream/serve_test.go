package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// startServer builds a server from serve's flags and serves it on a fresh
// socket; it returns the server, the socket path and a stop function that
// cancels it and returns serve's error.
func startServer(t *testing.T, args ...string) (*server, string, func() error) {
	t.Helper()
	e, _, _ := genEnv()
	return startServerEnv(t, e, args...)
}

// startServerEnv is startServer with the command's environment e.
func startServerEnv(t *testing.T, e *env, args ...string) (*server, string, func() error) {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "lrs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	srv, _, err := newServer(ctx, e, append([]string{"--socket", sock}, args...))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := listenUnix(sock)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.serve(ctx, ln) }()
	stopped := false
	var serr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			serr = <-done
		}
		return serr
	}
	t.Cleanup(func() { stop() })
	return srv, sock, stop
}

// dialHello connects and sends a hello.
func dialHello(t *testing.T, sock string, h sink.Hello) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(sink.AppendHello(nil, h)); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("timed out waiting for %s; goroutines:\n%s", what, buf[:runtime.Stack(buf, true)])
}

// TestServeStalledClientsBounded: clients that stop reading block only
// their own producers; what the server holds for them stays within
// --client-buffer each; clients beyond --max-clients get an in-band
// "server full" error while the others stall; a client that reads is
// served meanwhile; and once the stalled clients leave, their slots,
// buffers and goroutines are freed.
func TestServeStalledClientsBounded(t *testing.T) {
	const maxClients, buf = 6, 32 << 10
	srv, sock, _ := startServer(t, "--mode", "drop", "--keep-language", "--batch-size", "8", "--max-clients", "7", "--client-buffer", "32KiB", "--cameras", "none")
	// A first client served to its end: the baseline of goroutines.
	warm := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	if st, err := sink.Decode(warm); err != nil || st.End == nil {
		t.Fatalf("first client: %v", err)
	}
	warm.Close()
	waitFor(t, "the first client to leave", func() bool { return srv.stats.clients.Load() == 0 })
	base := runtime.NumGoroutine()
	// 6 stalled clients (the demo stream with --keep-language is ≈3.3 MB,
	// far more than a socket's buffer and the client buffer).
	var stalled []net.Conn
	for i := 0; i < maxClients; i++ {
		stalled = append(stalled, dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1}))
	}
	waitFor(t, "6 clients", func() bool { return srv.stats.clients.Load() == maxClients })
	// Let the producers run into the stalled sockets.
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 5; i++ {
		if n := srv.stats.inflight.Load(); n > maxClients*buf {
			t.Fatalf("the server holds %d bytes for %d stalled clients; at most %d", n, maxClients, maxClients*buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A reading client is served completely meanwhile (the 7th slot).
	c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	st, err := sink.Decode(c)
	c.Close()
	if err != nil || st.End == nil || st.End.Batches == 0 {
		t.Fatalf("a reading client next to stalled ones: %v", err)
	}
	// Its slot is free only once the server has finished with it (the end
	// was read before the server's goroutine returned): a client dialed
	// before then would be refused.
	waitFor(t, "the reading client to leave", func() bool { return srv.stats.clients.Load() == maxClients })
	// Fill the 7th slot with a stalled client: an 8th is refused in-band.
	stalled = append(stalled, dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1}))
	waitFor(t, "7 clients", func() bool { return srv.stats.clients.Load() == 7 })
	c = dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	_, err = sink.Decode(c)
	c.Close()
	var se *sink.StreamError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "server full") || !strings.Contains(se.Message, "--max-clients 7") {
		t.Fatalf("8th client: %v, want an in-band \"server full\" error", err)
	}
	// The stalled clients leave: everything they held is freed.
	for _, c := range stalled {
		c.Close()
	}
	waitFor(t, "the clients to be released", func() bool {
		return srv.stats.clients.Load() == 0 && srv.stats.inflight.Load() == 0
	})
	waitFor(t, "the producers' goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
	if srv.stats.rejected.Load() != 1 {
		t.Fatalf("%d clients rejected, want 1", srv.stats.rejected.Load())
	}
}

// TestServeClientMemory: serve bounds the memory of each client by its
// stream's estimate (held frames, keep index and orders, write buffer): a
// client that needs more than --client-memory is refused in-band, the
// admitted clients' reservations are each within the budget, and the soft
// memory limit follows them (224 MiB above their sum, at least 448 MiB) and
// returns to its floor when they leave.
func TestServeClientMemory(t *testing.T) {
	args := []string{"--mode", "fallback", "--shuffle", "--seed", "3", "--order", "partitioned", "--partitions", "4",
		"--batch-size", "8", "--client-buffer", "32KiB", "--shuffle-buffer", "64", "--epochs", "0", "--cameras", "none"}
	// The estimates, from a server without a budget: one consumer holds
	// all four partitions' open episodes, a consumer of four one.
	probe, _, _ := startServer(t, append(args, "--client-memory", "0")...)
	one := probe.need(sink.Hello{NumWorkers: 1, WorldSize: 1}).total()
	four := probe.need(sink.Hello{NumWorkers: 1, WorldSize: 4, Rank: 2}).total()
	if four <= 32<<10 || four*2 > one {
		t.Fatalf("estimates: %d bytes for one consumer, %d for one of four: want the consumer of four to need less than half", one, four)
	}
	budget := (one + four) / 2
	e, _, _ := genEnv()
	var mu sync.Mutex
	var limits []int64
	e.memoryLimit = func(n int64) int64 {
		mu.Lock()
		limits = append(limits, n)
		mu.Unlock()
		return 0
	}
	lastLimit := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(limits) == 0 {
			return -1
		}
		return limits[len(limits)-1]
	}
	srv, sock, _ := startServerEnv(t, e, append(args, "--client-memory", fmt.Sprint(budget))...)
	if got := lastLimit(); got != trainMemoryLimit {
		t.Fatalf("soft limit %d before any client, want %d", got, trainMemoryLimit)
	}
	// A lone consumer needs more than the budget: refused in-band, saying
	// what to change.
	c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	_, err := sink.Decode(c)
	c.Close()
	var se *sink.StreamError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "--client-memory") || !strings.Contains(se.Message, "more consumers") {
		t.Fatalf("a client needing %d bytes with a budget of %d: %v, want an in-band --client-memory error", one, budget, err)
	}
	// Four stalled consumers of four are admitted (their streams run
	// forever, --epochs 0): each reserves its estimate, within the budget.
	var stalled []net.Conn
	for r := range 4 {
		stalled = append(stalled, dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 4, Rank: r}))
	}
	waitFor(t, "4 clients' reservations", func() bool { return srv.mem.total() == 4*four })
	if four > budget {
		t.Fatalf("a client reserved %d bytes, more than the budget %d", four, budget)
	}
	if got, want := lastLimit(), max(trainMemoryLimit, trainMemoryRest+4*four); got != want {
		t.Fatalf("soft limit %d with 4 clients, want %d", got, want)
	}
	for _, c := range stalled {
		c.Close()
	}
	waitFor(t, "the clients to be released", func() bool { return srv.stats.clients.Load() == 0 && srv.mem.total() == 0 })
	if got := lastLimit(); got != trainMemoryLimit {
		t.Fatalf("soft limit %d after the clients left, want %d", got, trainMemoryLimit)
	}
	// A bad budget is refused.
	if _, _, err := newServer(t.Context(), e, []string{"--socket", "x", "--client-memory", "lots"}); err == nil || !strings.Contains(err.Error(), "--client-memory") {
		t.Fatalf("--client-memory lots: %v", err)
	}
	// With GOMEMLIMIT set the server sets no limit (the budget still holds).
	e.getenv = func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}
	mu.Lock()
	limits = nil
	mu.Unlock()
	srv2, _, _ := startServerEnv(t, e, append(args, "--client-memory", fmt.Sprint(budget))...)
	if srv2.mem.setLimit != nil || lastLimit() != -1 {
		t.Fatalf("GOMEMLIMIT set: the server set a soft limit (%d)", lastLimit())
	}
}

// TestServeWriteTimeout: a client that never reads is disconnected after
// --write-timeout, freeing its slot.
func TestServeWriteTimeout(t *testing.T) {
	srv, sock, _ := startServer(t, "--keep-language", "--max-clients", "1", "--client-buffer", "16KiB", "--write-timeout", "200ms")
	c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	defer c.Close()
	waitFor(t, "the client to be streamed", func() bool { return srv.stats.inflight.Load() > 0 })
	waitFor(t, "the client to be dropped", func() bool {
		return srv.stats.clients.Load() == 0 && srv.stats.inflight.Load() == 0
	})
	// The slot is free again: the next client is served (its header and
	// first batch; reading the whole stream would make the test depend on
	// this process reading within the 200 ms write timeout under load).
	r := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	defer r.Close()
	d := sink.NewDecoder(r)
	for _, want := range []string{sink.TypeHeader, sink.TypeBatch} {
		m, err := d.Next()
		if err != nil {
			t.Fatalf("next client: %v", err)
		}
		if m.Type != want {
			t.Fatalf("next client: a %s message (%s), want %s", m.Type, m.Error, want)
		}
	}
}

// TestServeShutdownInBand: stopping the server (SIGINT/SIGTERM cancel its
// context) gives a connected, reading client an in-band "server shutting
// down" error, and a client still in its hello too; a stalled client does
// not hold the shutdown beyond the grace period.
func TestServeShutdownInBand(t *testing.T) {
	srv, sock, stop := startServer(t, "--keep-language", "--batch-size", "4", "--client-buffer", "4KiB", "--epochs", "0")
	reading := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	defer reading.Close()
	stalled := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	defer stalled.Close()
	silent, err := net.Dial("unix", sock) // never sends its hello
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitFor(t, "3 clients", func() bool { return srv.stats.clients.Load() == 3 })
	d := sink.NewDecoder(reading)
	for i := 0; i < 3; i++ { // the stream is under way
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	res := make(chan error, 1)
	go func() {
		for {
			m, err := d.Next()
			if err != nil {
				res <- err
				return
			}
			if m.Type == sink.TypeError {
				res <- &sink.StreamError{Message: m.Error}
				return
			}
			if m.Type != sink.TypeBatch {
				res <- errors.New("a " + m.Type + " message")
				return
			}
		}
	}()
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if el := time.Since(start); el > shutdownGrace+3*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
	var se *sink.StreamError
	if err := <-res; !errors.As(err, &se) || se.Message != "server shutting down" {
		t.Fatalf("reading client: %v, want the in-band error \"server shutting down\"", err)
	}
	_, err = sink.Decode(silent)
	if !errors.As(err, &se) || se.Message != "server shutting down" {
		t.Fatalf("client in its hello: %v", err)
	}
}

// TestServeHelloOutOfRange: shares that would overflow are refused in-band.
func TestServeHelloOutOfRange(t *testing.T) {
	_, sock, _ := startServer(t)
	for _, h := range []sink.Hello{
		{NumWorkers: 1 << 32, WorldSize: 1 << 32},
		{NumWorkers: 1 << 62},
		{Worker: -1, NumWorkers: 2, WorldSize: 1},
		{Rank: 3, NumWorkers: 1, WorldSize: 3},
	} {
		c := dialHello(t, sock, h)
		st, err := sink.Decode(c)
		c.Close()
		var se *sink.StreamError
		if !errors.As(err, &se) || !strings.HasPrefix(se.Message, "bad hello") || st.Header != nil {
			t.Fatalf("hello %+v: %v, want a lone in-band \"bad hello\" error", h, err)
		}
	}
	_ = bytes.MinRead
}

// TestServeCameraMemory: with camera frames the server's soft memory
// limit follows its clients' estimates too (a training client's
// pipeline.TrainBytes, a plain client's camera pieces), instead of none;
// a plain client's pieces are not held against --client-memory.
func TestServeCameraMemory(t *testing.T) {
	ds := &schema.Dataset{}
	for i := range int64(40) {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: i, Length: 300})
	}
	cfg := &pipeline.Config{Dataset: ds, Workers: 2,
		Cameras: &video.Set{Cameras: []video.Camera{{Key: "front", C: 3, H: 480, W: 640}, {Key: "wrist", C: 3, H: 480, W: 640}}}}
	mix := []pipeline.Mix{{Config: cfg, Weight: 1}}
	var limit int64
	e := &env{getenv: func(string) string { return "" }, memoryLimit: func(n int64) int64 { limit = n; return 0 }}
	set := serveMemoryLimit(e, mix)
	if set == nil {
		t.Fatal("no soft memory limit for a camera dataset")
	}
	mem := &serveMemory{budget: 1 << 30, setLimit: set}
	plain := liveNeed(sink.Hello{NumWorkers: 1, WorldSize: 1}, mix, &trainFlags{epochs: 1, order: pipeline.OrderGlobal, worldSize: 1}, 1<<20)
	if plain.decoding != pipeline.PlainBytes(mix) || plain.decoding <= 1<<30 {
		t.Fatalf("plain camera client: decoding %d, want PlainBytes %d (above the 1 GiB budget here)", plain.decoding, pipeline.PlainBytes(mix))
	}
	release, err := mem.reserve(plain)
	if err != nil {
		t.Fatalf("a plain camera client refused for its pieces: %v", err)
	}
	if want := trainMemoryRest + plain.total(); limit != want {
		t.Errorf("soft limit %d with a plain camera client, want %d", limit, want)
	}
	release()
	// A shuffled client: its estimate, bounded by the default camera
	// memory.
	tf := &trainFlags{shuffle: true, buffer: pipeline.DefaultBufferSize, worldSize: 1, epochs: 1, order: pipeline.OrderGlobal}
	tr := liveNeed(sink.Hello{NumWorkers: 1, WorldSize: 1}, mix, tf, 0)
	if n := tr.total() + trainMemoryRest; n > pipeline.DefaultCameraMemory || tr.held == 0 {
		t.Errorf("shuffled camera client: estimate + rest %d (held %d), want at most %d", n, tr.held, pipeline.DefaultCameraMemory)
	}
}
