package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Serve limits (docs/wire-format.md, "Limits").
const (
	// defaultMaxClients is --max-clients: 8 ranks × 8 DataLoader workers.
	defaultMaxClients = 64
	// defaultWriteTimeout is --write-timeout: a client that accepts no
	// byte for this long is disconnected.
	defaultWriteTimeout = 30 * time.Minute
	// shutdownGrace is how long a client gets to take its last batch and
	// the "server shutting down" error on SIGINT/SIGTERM.
	shutdownGrace = 2 * time.Second
	// writeChunk bounds one socket write, so that the write timeout
	// measures a lack of progress, not the time a large batch takes.
	writeChunk = 64 << 10
)

// errShutdown is the in-band error clients get when the server stops.
var errShutdown = errors.New("server shutting down")

// serveLimits bound what the server holds for its clients.
type serveLimits struct {
	// MaxClients is the number of clients streamed at once; more get an
	// in-band "server full" error.
	MaxClients int
	// Buffer is the per-client write buffer in bytes.
	Buffer int
	// WriteTimeout disconnects a client whose socket accepts nothing for
	// this long (0: never).
	WriteTimeout time.Duration
	// MaxSHM is the largest shared-memory arena a client may offer
	// (--client-shm; 0: none is used).
	MaxSHM int64
}

// serveStats are the server's live counters (for tests and logs).
type serveStats struct {
	// clients is the number of clients being streamed.
	clients atomic.Int64
	// inflight is the number of bytes the server holds for its clients:
	// buffered in their writers or being written to their sockets.
	inflight atomic.Int64
	// rejected counts clients refused because the server was full.
	rejected atomic.Int64
	// lastFree rate-limits returning memory to the OS.
	mu       sync.Mutex
	lastFree time.Time
}

// clientLeft is called when a client's stream ends: once the last client
// left, freed memory is returned to the operating system at once (the
// runtime would otherwise return it gradually).
func (s *serveStats) clientLeft() {
	if s.clients.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.lastFree) > time.Second {
		s.lastFree = time.Now()
		debug.FreeOSMemory()
	}
}

// clientWriter is a client connection's writer. It gathers whole messages
// (the msgpack sink writes one per call) in a buffer of at most limit
// bytes and writes them to the socket in chunks, each with a deadline: a
// client that stops reading blocks its own producer (nothing else is
// buffered for it) and is disconnected once no chunk is accepted for
// timeout. After a failed write every write fails (a message may be cut;
// nothing may follow it). Bytes held count in inflight.
type clientWriter struct {
	conn     net.Conn
	limit    int
	timeout  time.Duration
	inflight *atomic.Int64
	buf      []byte
	err      error
	// stopAt is the shutdown deadline (unix nanoseconds, 0: none).
	stopAt atomic.Int64
}

func newClientWriter(conn net.Conn, lim serveLimits, inflight *atomic.Int64) *clientWriter {
	return &clientWriter{conn: conn, limit: max(lim.Buffer, 1), timeout: lim.WriteTimeout, inflight: inflight}
}

// Write buffers p, writing the buffer out first when p does not fit; a
// message larger than the buffer is written directly.
func (w *clientWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(w.buf)+len(p) > w.limit {
		if err := w.Flush(); err != nil {
			return 0, err
		}
	}
	if len(p) >= w.limit {
		w.inflight.Add(int64(len(p)))
		err := w.send(p)
		w.inflight.Add(-int64(len(p)))
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, w.limit)
	}
	w.buf = append(w.buf, p...)
	w.inflight.Add(int64(len(p)))
	return len(p), nil
}

// Flush writes the buffered messages.
func (w *clientWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.inflight.Add(-int64(len(w.buf)))
	w.buf = w.buf[:0]
	return err
}

// Release drops the buffer (its bytes no longer count as held).
func (w *clientWriter) Release() {
	w.inflight.Add(-int64(len(w.buf)))
	w.buf = nil
	if w.err == nil {
		w.err = net.ErrClosed
	}
}

// shutdown makes writes fail after the grace period.
func (w *clientWriter) shutdown(grace time.Duration) {
	at := time.Now().Add(grace)
	w.stopAt.Store(at.UnixNano())
	w.conn.SetWriteDeadline(at)
}

func (w *clientWriter) send(p []byte) error {
	for len(p) > 0 {
		var dl time.Time
		if w.timeout > 0 {
			dl = time.Now().Add(w.timeout)
		}
		if s := w.stopAt.Load(); s != 0 && (dl.IsZero() || s < dl.UnixNano()) {
			dl = time.Unix(0, s)
		}
		w.conn.SetWriteDeadline(dl)
		// shutdown stores stopAt before setting its deadline: a deadline
		// set here after that store sees it now.
		if s := w.stopAt.Load(); s != 0 && (dl.IsZero() || s < dl.UnixNano()) {
			w.conn.SetWriteDeadline(time.Unix(0, s))
		}
		n, err := w.conn.Write(p[:min(len(p), writeChunk)])
		p = p[n:]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && w.stopAt.Load() == 0 {
				err = fmt.Errorf("client read nothing for %v (--write-timeout): %w", w.timeout, err)
			}
			w.err = err
			return err
		}
	}
	return nil
}

// defaultClientMemory is --client-memory: the most memory one client's
// stream may hold by its estimate (pipeline.TrainBytes plus its write
// buffer). A language-only client needs far less (10M frames: about 126
// MiB in the global order, 172 MiB for a lone partitioned consumer); a
// camera client's estimate is sized to pipeline.DefaultCameraMemory less
// the process's rest by default (--shuffle-buffer-bytes auto: about 1.2
// GB for two 480×640 cameras and 2 workers, its shared-memory arena
// besides), so the default admits it with room for its arena.
const defaultClientMemory = "4GiB"

// defaultClientSHM is --client-shm: the largest shared-memory arena a
// client may offer (the Python client's default is 512 MiB).
const defaultClientSHM = "1GiB"

// serveMemory accounts the memory of the clients being streamed: each
// admitted client reserves its stream's estimate, which must fit the
// per-client budget, and the process's soft memory limit follows the
// reservations (trainMemoryRest above their sum, at least
// trainMemoryLimit), like lrstream stream's.
type serveMemory struct {
	// budget is the per-client budget in bytes (0: none).
	budget int64
	// setLimit sets the soft memory limit (debug.SetMemoryLimit); nil
	// when none is set (GOMEMLIMIT is set, camera frames, a replay).
	setLimit func(int64) int64
	mu       sync.Mutex
	reserved int64
}

// clientNeed is a client stream's memory estimate, in bytes. decoding is
// a plain pass's camera pieces (pipeline.PlainBytes): reserved, so that
// the soft limit covers them, but not held against --client-memory (a
// plain pass's pieces are bounded by --piece-mb and --workers, and such
// clients were always admitted).
type clientNeed struct{ held, index, buffer, decoding int64 }

func (n clientNeed) total() int64 { return n.held + n.index + n.buffer + n.decoding }

// init sets the soft limit of a server without clients.
func (m *serveMemory) init() {
	m.mu.Lock()
	m.limit()
	m.mu.Unlock()
}

// reserve admits a client whose stream needs about need, or refuses it when
// need exceeds the budget. release gives the reservation back.
func (m *serveMemory) reserve(need clientNeed) (release func(), err error) {
	n := need.total()
	if m.budget > 0 && n-need.decoding > m.budget {
		return nil, fmt.Errorf("this client's stream needs about %s (held frames %s, keep index and orders %s, write buffer %s), more than the server's --client-memory %s: "+
			"connect with more consumers (world size × workers), use fewer --partitions or a smaller --shuffle-buffer or --shuffle-buffer-bytes, or start the server with a larger --client-memory",
			mib(n), mib(need.held), mib(need.index), mib(need.buffer), mib(m.budget))
	}
	m.mu.Lock()
	m.reserved += n
	m.limit()
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.reserved -= n
		m.limit()
		m.mu.Unlock()
	}, nil
}

// limit sets the soft limit for the current reservations (m.mu held).
func (m *serveMemory) limit() {
	if m.setLimit != nil {
		m.setLimit(max(trainMemoryLimit, trainMemoryRest+m.reserved))
	}
}

// total returns the bytes reserved by the clients being streamed.
func (m *serveMemory) total() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserved
}

// mib formats a byte count in MiB.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
