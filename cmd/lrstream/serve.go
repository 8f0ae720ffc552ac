package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

func serveCommand() command {
	return command{name: "serve", summary: "serve batches over a Unix socket, a disjoint share per client", run: runServe}
}

func runServe(ctx context.Context, e *env, args []string) error {
	srv, socket, err := newServer(ctx, e, args)
	if err != nil {
		return err
	}
	ln, err := listenUnix(socket)
	if err != nil {
		return err
	}
	// Notes once the socket is bound: a run refused at startup prints
	// only its error.
	for _, note := range srv.notes {
		note()
	}
	srv.log.Info("serving", "socket", socket, "max_clients", srv.lim.MaxClients, "client_buffer", srv.lim.Buffer, "write_timeout", srv.lim.WriteTimeout, "client_memory", srv.mem.budget)
	return srv.serve(ctx, ln)
}

// newServer parses serve's flags and loads what it serves.
func newServer(ctx context.Context, e *env, args []string) (*server, string, error) {
	var rf runFlags
	var bf batchFlags
	fs := flag.NewFlagSet("lrstream serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	rf.register(fs)
	bf.register(fs)
	var tf trainFlags
	tf.register(fs, e, false)
	socket := fs.String("socket", "", "Unix socket path to listen on (created 0600; required)")
	from := fs.String("from", "", "serve the pre-rendered shards in DIR (lrstream prerender) instead of rendering")
	lim := serveLimits{}
	fs.IntVar(&lim.MaxClients, "max-clients", defaultMaxClients, "clients streamed at once; more get an in-band \"server full\" error")
	bufSize := fs.String("client-buffer", "1MiB", "write buffer per client (whole messages; a larger batch is written directly)")
	fs.DurationVar(&lim.WriteTimeout, "write-timeout", defaultWriteTimeout, "disconnect a client that reads nothing for this long (0: never)")
	shmMax := fs.String("client-shm", defaultClientSHM, "largest shared-memory arena a client may offer for camera frames (Python client: connect(shm_bytes=)); a larger one, or any with 0, streams through the socket instead (docs/wire-format.md \"Shared memory\")")
	clientMem := fs.String("client-memory", defaultClientMemory, "memory budget per client: a client whose stream needs more by its estimate (held frames, keep index and orders, write buffer) is refused in-band; the soft memory limit follows the clients' estimates (0: no budget; docs/training.md \"Memory\")")
	quiet := fs.Bool("q", false, "log warnings and errors only, not the INFO lines of every client connection (--log-level warn)")
	logLevel := fs.String("log-level", "info", "least severe stderr log line: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream serve --socket PATH [--dataset DIR|ORG/NAME] [--recipe FILE] [flags]\n\nEach client sends a msgpack hello {worker, num_workers, rank, world_size} and\nreceives the stream of its share of the episodes (docs/wire-format.md).\nWithout a recipe (a --dataset without --recipe, or --recipe none) nothing is\nrendered: the batches carry no messages.\nMemory: each client's stream must fit --client-memory by its estimate\n(held frames, keep index and orders, write buffer), or the client is refused\nin-band; without camera frames the soft memory limit is 224 MiB above the\nadmitted clients' estimates, at least 448 MiB, unless GOMEMLIMIT is set\n(docs/training.md \"Memory\").\nStops on SIGINT/SIGTERM.\n\nflags:")
		printFlags(fs)
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, "", err
	}
	if *socket == "" {
		return nil, "", missingFlag(fs, "socket")
	}
	if err := bf.validate(); err != nil {
		return nil, "", err
	}
	if err := tf.validate(); err != nil {
		return nil, "", err
	}
	budget, err := lim.parse(*bufSize, *shmMax, *clientMem)
	if err != nil {
		return nil, "", err
	}
	log, err := serveLogger(e, *logLevel, *quiet)
	if err != nil {
		return nil, "", err
	}
	// Every client's training iteration states the same warnings (the
	// shuffle buffer lowered): logged once.
	tf.log = slog.New(newOnceHandler(log.Handler()))
	srv := &server{lim: lim, log: log, mem: &serveMemory{budget: budget}}
	if *from != "" {
		dir := *from
		if isStoreURL(dir) { // mirrored into the node's object cache for the server's life
			if err := checkReplayFlags(fs); err != nil {
				return nil, "", err
			}
			local, cleanup, err := mirrorStore(ctx, e, dir)
			if err != nil {
				return nil, "", err
			}
			context.AfterFunc(ctx, cleanup)
			dir = local
		}
		err = srv.setupReplay(fs, dir, &tf)
	} else {
		rf.noBatchCheck = rf.noBatchCheck || bf.batchSize == 1 // see runStream
		err = srv.setupLive(ctx, e, &rf, &bf, &tf)
		// The frame cache is shared by the clients; its statistics are
		// recorded when the server stops.
		context.AfterFunc(ctx, func() { rf.frameCache.close(e.stderr, true) })
	}
	if err != nil {
		return nil, "", err
	}
	return srv, *socket, nil
}

// parse checks --max-clients and --write-timeout, sets the client buffer
// and shared-memory limits from --client-buffer and --client-shm, and
// returns the --client-memory budget (0: none).
func (lim *serveLimits) parse(bufSize, shmMax, clientMem string) (budget int64, err error) {
	if lim.MaxClients < 1 {
		return 0, fmt.Errorf("--max-clients must be at least 1, not %d", lim.MaxClients)
	}
	if lim.WriteTimeout < 0 {
		return 0, fmt.Errorf("--write-timeout must be >= 0, not %v", lim.WriteTimeout)
	}
	n, perr := prerender.ParseSize(bufSize)
	if perr != nil || n > 1<<30 {
		return 0, fmt.Errorf("--client-buffer %q: want a size from 1B to 1GiB", bufSize)
	}
	lim.Buffer = int(n)
	if strings.TrimSpace(shmMax) != "0" {
		if lim.MaxSHM, perr = prerender.ParseSize(shmMax); perr != nil || lim.MaxSHM < 1 {
			return 0, fmt.Errorf("--client-shm %q: want a size such as 1GiB, or 0 for no shared memory", shmMax)
		}
	}
	if strings.TrimSpace(clientMem) != "0" {
		if budget, perr = prerender.ParseSize(clientMem); perr != nil || budget < 1 {
			return 0, fmt.Errorf("--client-memory %q: want a size such as 2GiB, or 0 for no budget", clientMem)
		}
	}
	return budget, nil
}

// serveLogger returns the server's stderr logger at --log-level, at
// least warn with -q.
func serveLogger(e *env, logLevel string, quiet bool) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
	}
	if quiet {
		level = max(level, slog.LevelWarn)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})), nil
}

// setupReplay makes srv serve the pre-rendered shards of dir (--from).
func (srv *server) setupReplay(fs *flag.FlagSet, dir string, tf *trainFlags) error {
	if err := checkReplayFlags(fs); err != nil {
		return err
	}
	x, err := prerender.ReadIndex(dir)
	if err != nil {
		return err
	}
	srv.stream = func(ctx context.Context, h sink.Hello, w *clientWriter, _ *sink.Ring, log *slog.Logger) error {
		train, live := replayTrain(tf, h.Resume, x), ""
		if h.Resume != "" && prerender.IsLiveToken(h.Resume) && !tf.shuffle && tf.epochs == 1 {
			// A token the stored batches carry resumes the plain
			// replay that carried it (see replay).
			train, live = nil, h.Resume
		}
		return streamReplay(ctx, h, w, dir, train, live)
	}
	return nil
}

// setupLive makes srv render the datasets of the run flags for each
// client.
func (srv *server) setupLive(ctx context.Context, e *env, rf *runFlags, bf *batchFlags, tf *trainFlags) error {
	mix, err := rf.openMix(ctx, e)
	if err != nil {
		return err
	}
	so := bf.options(rf, tf.json())
	// Each client's training options come with its hello; the
	// rest is refused here rather than in every client's stream.
	if err := pipeline.CheckStart(mix, so, nil); err != nil {
		return err
	}
	if tf.spill != "" {
		// The clients' pieces are sized by the form their frames are
		// held in, measured once, before the clients share the configs.
		if err := pipeline.MeasureHeldFrames(ctx, mix); err != nil {
			return err
		}
	}
	cache := &pipeline.IndexCache{} // one pre-pass for all clients
	srv.mem.setLimit = serveMemoryLimit(e, mix)
	srv.mem.init()
	buffer := int64(srv.lim.Buffer)
	srv.need = func(h sink.Hello) clientNeed { return liveNeed(h, mix, tf, buffer) }
	for _, m := range mix {
		srv.frames = srv.frames || pipeline.CameraBytesPerSample(m.Config) > 0
	}
	srv.stream = func(ctx context.Context, h sink.Hello, w *clientWriter, ring *sink.Ring, log *slog.Logger) error {
		return streamLive(ctx, h, w, ring, mix, so, tf, cache, srv.mem, srv.need(h))
	}
	log := srv.log
	srv.notes = append(srv.notes, func() {
		log.Info("loaded", "dataset", mix[0].Config.Dataset.ID, "recipe", mix[0].Config.Recipe.Name())
		logCameraNotes(log, mix)
	})
	return nil
}

// listenUnix listens on a Unix socket at path, created with mode 0600.
// A stale socket file (nothing accepts on it) is replaced; a live socket or
// a path that is not a socket is refused.
func listenUnix(path string) (*net.UnixListener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("--socket %s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("--socket %s: another server is listening on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	// The umask makes the socket 0600 from its creation, with no window in
	// which another user could connect.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// server accepts clients and streams to each within its limits.
type server struct {
	lim   serveLimits
	stats serveStats
	mem   *serveMemory
	log   *slog.Logger
	// notes are logged once the server listens (runServe).
	notes []func()
	// frames says the live stream carries camera frames (the only
	// columns worth a client's shared-memory arena).
	frames bool
	// need estimates a live client's memory from its hello (nil for a
	// replay).
	need func(sink.Hello) clientNeed
	// stream streams one client's share (after its hello) to w, its
	// large payloads through ring when set (the client's shared memory);
	// it returns when the stream ended.
	stream func(ctx context.Context, h sink.Hello, w *clientWriter, ring *sink.Ring, log *slog.Logger) error
}

// serve accepts clients until ctx ends, then closes the listener (removing
// the socket file), gives every client an in-band "server shutting down"
// error (within shutdownGrace) and waits for the clients' streams to stop.
// At most lim.MaxClients clients are streamed at once; others get an
// in-band "server full" error.
func (s *server) serve(ctx context.Context, ln *net.UnixListener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	slots := make(chan struct{}, max(s.lim.MaxClients, 1))
	for id := 1; ; id++ {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				s.log.Info("shutting down", "clients", s.stats.clients.Load())
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		log := s.log.With("client", id)
		wg.Add(1)
		select {
		case slots <- struct{}{}:
			s.stats.clients.Add(1)
			go func() {
				defer wg.Done()
				// The slot is free before the client stops counting.
				defer s.stats.clientLeft()
				defer func() { <-slots }()
				s.client(ctx, conn, log)
			}()
		default:
			s.stats.rejected.Add(1)
			go func() {
				defer wg.Done()
				s.reject(conn, log)
			}()
		}
	}
}

// reject answers a client the server has no room for: it reads the hello
// (briefly) and writes a lone error.
func (s *server) reject(conn *net.UnixConn, log *slog.Logger) {
	defer conn.Close()
	log.Warn("server full, client refused", "max_clients", s.lim.MaxClients)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	sink.ReadHello(conn)
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	conn.Write(sink.AppendError(nil, fmt.Sprintf("server full: %d clients are being served (lrstream serve --max-clients %d); retry later", s.lim.MaxClients, s.lim.MaxClients)))
}

// client reads a client's hello and streams its share. When ctx ends (the
// server stops) the stream is cancelled with errShutdown, which the client
// receives in-band if it still reads within shutdownGrace.
func (s *server) client(ctx context.Context, conn *net.UnixConn, log *slog.Logger) {
	defer conn.Close()
	w := newClientWriter(conn, s.lim, &s.stats.inflight)
	defer w.Release()
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		cancel(errShutdown)
		conn.SetReadDeadline(time.Now())
		w.shutdown(shutdownGrace)
	})
	defer stop()
	fr := newFDReader(conn)
	defer fr.closeFDs()
	h, err := readClientHello(conn, fr)
	var ring *sink.Ring
	if err == nil {
		var mem []byte
		mem, err = s.arena(h, fr, log)
		if mem != nil {
			defer unmapArena(mem) // after the stream, the only writer
			ring = sink.NewRing(mem, w.Flush, s.lim.WriteTimeout)
			done := make(chan struct{})
			go func() {
				defer close(done)
				readReleases(conn, ring)
			}()
			// Closing a Unix socket with unread bytes resets the peer,
			// which may lose the end of the stream: the client's last
			// release message must be read first. Half-close, then wait
			// (briefly) for the client to close its side.
			defer func() {
				conn.CloseWrite()
				t := time.NewTimer(shutdownGrace)
				defer t.Stop()
				select {
				case <-done:
				case <-t.C:
				}
			}()
		}
	}
	if err != nil {
		if cctx.Err() != nil {
			err = errShutdown
		}
		log.Warn("bad hello", "err", err)
		w.Write(sink.AppendError(nil, inBandMessage(err)))
		w.Flush()
		return
	}
	log.Info("client", "rank", h.Rank, "world_size", h.WorldSize, "worker", h.Worker, "num_workers", h.NumWorkers)
	err = s.stream(cctx, h, w, ring, log)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil:
		log.Info("done")
	case errors.Is(context.Cause(cctx), errShutdown):
		log.Info("stopped: server shutting down")
	case isBrokenPipe(err) || errors.Is(err, net.ErrClosed):
		log.Info("client went away", "err", err)
	default:
		log.Warn("stream failed", "err", err)
	}
}

// inBandMessage is the text of the error message a client gets for err.
func inBandMessage(err error) string {
	if errors.Is(err, errShutdown) {
		return errShutdown.Error()
	}
	return fmt.Sprintf("bad hello: %v", err)
}

// readClientHello reads and checks a client's hello from r (conn's
// bytes, with the descriptors that come with them).
func readClientHello(conn *net.UnixConn, r io.Reader) (sink.Hello, error) {
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	h, err := sink.ReadHello(r)
	conn.SetReadDeadline(time.Time{})
	if err == nil {
		err = checkHello(h)
	}
	return h, err
}

// arena maps the shared-memory arena a hello offers, or returns nil when
// the client's batches go through the socket: no arena offered, a replay
// (pre-rendered bytes), a stream without camera frames, no support here, an arena above --client-shm or
// one that would take the client past --client-memory. An arena offered
// without exactly one memfd, or a memfd that is not sealed against
// shrinking or not of the offered size, is an error (in-band). The
// descriptors are closed either way (the mapping stays).
func (s *server) arena(h sink.Hello, fr *fdReader, log *slog.Logger) ([]byte, error) {
	defer fr.closeFDs()
	if h.SHM == 0 {
		return nil, nil
	}
	if !shmSupported {
		log.Info("shm arena declined: not supported on this system")
		return nil, nil
	}
	if len(fr.fds) != 1 {
		return nil, fmt.Errorf("the hello offers a %d-byte shm arena with %d file descriptors, want its memfd", h.SHM, len(fr.fds))
	}
	switch {
	case s.need == nil:
		log.Info("shm arena declined: a replay streams pre-rendered bytes")
		return nil, nil
	case !s.frames:
		log.Info("shm arena declined: the stream carries no camera frames")
		return nil, nil
	case s.lim.MaxSHM == 0 || h.SHM > s.lim.MaxSHM:
		log.Info("shm arena declined: larger than --client-shm", "shm", h.SHM, "client_shm", s.lim.MaxSHM)
		return nil, nil
	}
	if need := s.need(h).total(); s.mem.budget > 0 && need+h.SHM > s.mem.budget {
		log.Info("shm arena declined: it would take the client past --client-memory", "shm", h.SHM, "need", need, "client_memory", s.mem.budget)
		return nil, nil
	}
	mem, err := mapArena(fr.fds[0], h.SHM)
	if err != nil {
		return nil, err
	}
	log.Info("shm arena", "bytes", h.SHM)
	return mem, nil
}

// readReleases feeds ring the client's release messages until the
// connection ends or the client sends anything else (which fails the
// ring, and so the stream at its next placement).
func readReleases(conn *net.UnixConn, ring *sink.Ring) {
	br := bufio.NewReaderSize(conn, 512)
	for {
		batches, released, err := sink.ReadRelease(br)
		if err == nil {
			err = ring.Update(batches, released)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the client closed its side of the connection")
			}
			ring.Fail(fmt.Errorf("shm client: %w", err))
			return
		}
	}
}

// streamReplay streams a client's share of a pre-rendered directory (a
// training iteration at batch granularity with train, which carries the
// client's resume token).
func streamReplay(ctx context.Context, h sink.Hello, w *clientWriter, dir string, train *prerender.TrainOptions, liveResume string) error {
	if h.Position != nil {
		_, err := w.Write(sink.AppendError(nil, "positions (epoch, next) apply to live training streams; a pre-rendered replay resumes from a replay resume token"))
		return err
	}
	share := pipeline.Share{Worker: h.Rank*h.NumWorkers + h.Worker, NumWorkers: h.WorldSize * h.NumWorkers}
	hs := sink.Share{Rank: h.Rank, WorldSize: h.WorldSize, Worker: h.Worker, NumWorkers: h.NumWorkers}
	return prerender.ReplayWith(ctx, dir, share, w, prerender.ReplayOptions{HeaderShare: &hs, Train: train, LiveResume: liveResume})
}

// isTraining reports whether a live client gets a training iteration
// (otherwise a plain pass).
func isTraining(h sink.Hello, mix []pipeline.Mix, tf *trainFlags) bool {
	return tf.active() || h.Resume != "" || h.WorldSize > 1 || len(mix) > 1 || h.Position != nil
}

// liveNeed estimates the memory of a live client's stream: for a training
// iteration the frames it holds and its keep index and orders
// (pipeline.HeldBytes, pipeline.TrainBytes), for a plain pass its camera
// pieces (pipeline.PlainBytes, for the soft limit only), and its write
// buffer.
func liveNeed(h sink.Hello, mix []pipeline.Mix, tf *trainFlags, buffer int64) clientNeed {
	n := clientNeed{buffer: buffer}
	if isTraining(h, mix, tf) {
		to := tf.options(h.Rank, h.WorldSize, h.Worker, h.NumWorkers, h.Resume)
		n.held = pipeline.HeldBytes(mix, to)
		n.index = pipeline.TrainBytes(mix, to) - n.held
	} else {
		n.decoding = pipeline.PlainBytes(mix)
	}
	return n
}

// streamLive renders and streams a client's share, once its memory
// estimate fits the per-client budget (mem).
func streamLive(ctx context.Context, h sink.Hello, w *clientWriter, ring *sink.Ring, mix []pipeline.Mix, so pipeline.StreamOptions, tf *trainFlags, cache *pipeline.IndexCache, mem *serveMemory, need clientNeed) error {
	s := shareSink{sink.NewMsgpack(w), h, ctx}
	if ring != nil {
		s.Msgpack.Arena = ring
	}
	release, err := mem.reserve(need)
	if err != nil {
		_ = s.Fail(err)
		return err
	}
	defer release()
	if isTraining(h, mix, tf) {
		// Training iteration: global batches shared out round-robin.
		to := tf.options(h.Rank, h.WorldSize, h.Worker, h.NumWorkers, h.Resume)
		to.Position, to.Workers = h.Position, h.NumWorkers // hello "epoch"/"next": an exact start
		to.Cache = cache
		_, err = pipeline.TrainMix(ctx, mix, so, to, s)
	} else {
		// A plain pass: each worker reads its own run of episodes. With
		// an arena its camera frames stay as decoded until they are
		// converted straight into it, instead of being converted into
		// their piece and copied there (a training iteration always
		// holds them so, pipeline.Config.StoredFrames).
		c := *mix[0].Config
		c.Share = pipeline.Share{Worker: h.Worker, NumWorkers: h.NumWorkers}
		c.StoredFrames = ring != nil
		_, err = pipeline.Stream(ctx, &c, so, s)
	}
	return err
}

// serveMemoryLimit returns the function that sets serve's soft memory
// limit, or nil when none is set (GOMEMLIMIT is set). With camera frames
// too: a client's estimate (pipeline.TrainBytes) counts its decoded
// frames, pieces and decoder buffers (docs/training.md, "Camera frames:
// the bound"), so the limit follows the clients' reservations instead of
// the heap growing to GOGC times the live frames.
func serveMemoryLimit(e *env, mix []pipeline.Mix) func(int64) int64 {
	if e.memoryLimit == nil || e.getenv == nil || e.getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return e.memoryLimit
}

// shareSink writes the client's own rank and worker into the header, and
// "server shutting down" as the error when the server stops.
type shareSink struct {
	*sink.Msgpack
	h   sink.Hello
	ctx context.Context
}

// Fail writes the in-band error.
func (s shareSink) Fail(err error) error {
	if errors.Is(context.Cause(s.ctx), errShutdown) {
		err = errShutdown
	}
	return s.Msgpack.Fail(err)
}

func (s shareSink) Header(h sink.Header) error {
	h.Share = sink.Share{Rank: s.h.Rank, WorldSize: s.h.WorldSize, Worker: s.h.Worker, NumWorkers: s.h.NumWorkers}
	h.SHM = s.Msgpack.Arena != nil
	return s.Msgpack.Header(h)
}

// checkHello checks the share a hello asks for (sink.CheckShare: ranges
// and at most sink.MaxConsumers consumers, so no share arithmetic
// overflows).
func checkHello(h sink.Hello) error {
	return sink.CheckShare(h)
}
