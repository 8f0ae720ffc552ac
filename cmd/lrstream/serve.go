package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
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
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream serve --socket PATH [--dataset DIR|ORG/NAME] [--recipe FILE] [flags]\n\nEach client sends a msgpack hello {worker, num_workers, rank, world_size} and\nreceives the stream of its share of the episodes (docs/wire-format.md).\nStops on SIGINT/SIGTERM.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *socket == "" {
		fs.Usage()
		return exitError{2}
	}
	if err := bf.validate(); err != nil {
		return err
	}
	if err := tf.validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	var handle func(ctx context.Context, conn *net.UnixConn, log *slog.Logger)
	if *from != "" {
		if tf.active() {
			return errors.New("--from serves a pre-rendered pass; --shuffle and --epochs apply to live streams")
		}
		if _, err := prerender.ReadIndex(*from); err != nil {
			return err
		}
		handle = func(ctx context.Context, conn *net.UnixConn, log *slog.Logger) {
			serveReplay(ctx, conn, *from, log)
		}
	} else {
		mix, err := rf.openMix(ctx, e)
		if err != nil {
			return err
		}
		so := bf.options(&rf, tf.json())
		cache := &pipeline.IndexCache{} // one pre-pass for all clients
		handle = func(ctx context.Context, conn *net.UnixConn, log *slog.Logger) {
			serveClient(ctx, conn, mix, so, &tf, cache, log)
		}
		log.Info("loaded", "dataset", mix[0].Config.Dataset.ID, "recipe", mix[0].Config.Recipe.Name())
	}
	ln, err := listenUnix(*socket)
	if err != nil {
		return err
	}
	log.Info("serving", "socket", *socket)
	return serve(ctx, ln, handle, log)
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

// serve accepts clients until ctx ends, then closes the listener (removing
// the socket file) and waits for the clients' streams to stop.
func serve(ctx context.Context, ln *net.UnixListener, handle func(context.Context, *net.UnixConn, *slog.Logger), log *slog.Logger) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for id := 1; ; id++ {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				log.Info("shutting down")
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(ctx, conn, log.With("client", id))
		}()
	}
}

// readClientHello reads and checks a client's hello; on failure it answers
// with an in-band error and returns false.
func readClientHello(conn *net.UnixConn, log *slog.Logger) (sink.Hello, bool) {
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	h, err := sink.ReadHello(conn)
	conn.SetReadDeadline(time.Time{})
	if err == nil {
		err = checkHello(h)
	}
	if err != nil {
		log.Warn("bad hello", "err", err)
		conn.Write(sink.AppendError(nil, fmt.Sprintf("bad hello: %v", err)))
		return h, false
	}
	return h, true
}

// serveReplay streams a client's share of a pre-rendered directory.
func serveReplay(ctx context.Context, conn *net.UnixConn, dir string, log *slog.Logger) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	h, ok := readClientHello(conn, log)
	if !ok {
		return
	}
	if h.Resume != "" || h.Position != nil {
		conn.Write(sink.AppendError(nil, "resume tokens and positions (epoch, next) apply to live training streams, not to pre-rendered replays"))
		return
	}
	w := bufio.NewWriterSize(conn, 1<<20)
	share := pipeline.Share{Worker: h.Rank*h.NumWorkers + h.Worker, NumWorkers: h.WorldSize * h.NumWorkers}
	hs := sink.Share{Rank: h.Rank, WorldSize: h.WorldSize, Worker: h.Worker, NumWorkers: h.NumWorkers}
	err := prerender.ReplayWith(ctx, dir, share, w, prerender.ReplayOptions{HeaderShare: &hs})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil && !isBrokenPipe(err) && ctx.Err() == nil {
		log.Warn("replay failed", "err", err)
	}
}

// serveClient reads the client's hello and streams its share.
func serveClient(ctx context.Context, conn *net.UnixConn, mix []pipeline.Mix, so pipeline.StreamOptions, tf *trainFlags, cache *pipeline.IndexCache, log *slog.Logger) {
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Closing the connection when ctx ends unblocks a write to a client
	// that stopped reading.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	h, ok := readClientHello(conn, log)
	if !ok {
		return
	}
	w := bufio.NewWriterSize(conn, 1<<20)
	s := sink.NewMsgpack(w)
	var err error
	c := *mix[0].Config
	log.Info("client", "rank", h.Rank, "world_size", h.WorldSize, "worker", h.Worker, "num_workers", h.NumWorkers)
	var st *pipeline.Stats
	if tf.active() || h.Resume != "" || h.WorldSize > 1 || len(mix) > 1 || h.Position != nil {
		// Training iteration: global batches shared out round-robin.
		to := tf.options(h.Rank, h.WorldSize, h.Worker, h.NumWorkers, h.Resume)
		to.Position, to.Workers = h.Position, h.NumWorkers // hello "epoch"/"next": an exact start
		to.Cache = cache
		st, err = pipeline.TrainMix(ctx, mix, so, to, shareSink{s, h})
	} else {
		// A plain pass: each worker reads its own run of episodes.
		c.Share = pipeline.Share{Worker: h.Worker, NumWorkers: h.NumWorkers}
		st, err = pipeline.Stream(ctx, &c, so, shareSink{s, h})
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil:
		log.Info("done", "frames", st.Frames, "rendered", st.Rendered)
	case isBrokenPipe(err) || errors.Is(err, net.ErrClosed) || ctx.Err() != nil:
		log.Info("client went away", "err", err)
	default:
		log.Warn("stream failed", "err", err)
	}
}

// shareSink writes the client's own rank and worker into the header.
type shareSink struct {
	*sink.Msgpack
	h sink.Hello
}

func (s shareSink) Header(h sink.Header) error {
	h.Share = sink.Share{Rank: s.h.Rank, WorldSize: s.h.WorldSize, Worker: s.h.Worker, NumWorkers: s.h.NumWorkers}
	return s.Msgpack.Header(h)
}

// checkHello checks the share a hello asks for (sink.CheckShare: ranges
// and at most sink.MaxConsumers consumers, so no share arithmetic
// overflows).
func checkHello(h sink.Hello) error {
	return sink.CheckShare(h)
}
