// Command lrstream streams LeRobot v3 datasets with language columns,
// renders every frame through a training recipe with LeRobot's exact
// semantics, and emits collated batches for a Python training process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// env is what a subcommand may touch of the outside world; tests build
// their own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// memoryLimit sets the process's soft memory limit
	// (debug.SetMemoryLimit in main; nil, a no-op, in tests that run
	// commands in-process).
	memoryLimit func(int64) int64
}

// command is one lrstream subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists the subcommands in the order `lrstream help` shows them.
func commands() []command {
	return []command{
		genCommand(),
		inspectCommand(),
		recipeCommand(),
		streamCommand(),
		serveCommand(),
		prerenderCommand(),
		verifyCommand(),
		validateCommand(),
		benchCommand(),
		cacheCommand(),
	}
}

// exitError carries a specific exit status.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// A consumer closing our stdout pipe must surface as EPIPE write errors
	// (a clean end of the stream), not kill the process.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		// Every command's working set is small and bounded (row groups in
		// flight, batch buffers), while decoding and generating churn
		// through short-lived buffers: a lazier GC saves 5-15% of CPU for
		// a peak RSS that stays far below the limits (docs/performance.md).
		// GOGC in the environment still wins.
		debug.SetGCPercent(400)
	}
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, memoryLimit: debug.SetMemoryLimit}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run dispatches to a subcommand and returns the process exit status.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 2 && args[0] == "help" {
		// `lrstream help CMD` is `lrstream CMD --help`.
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintf(e.stdout, "lrstream %s (%s)\n", version(), runtime.Version())
		fmt.Fprintln(e.stdout, ffmpegVersion(ctx))
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, e, args[1:])
			var ee exitError
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.As(err, &ee):
				return ee.code
			case ctx.Err() != nil && errors.Is(err, context.Canceled):
				// SIGINT/SIGTERM: the conventional 128+SIGINT status.
				msg := strings.TrimSuffix(tidyError(c.name, err), context.Canceled.Error())
				msg = strings.TrimSuffix(strings.TrimSuffix(msg, " "), ":")
				if !strings.HasPrefix(msg, "interrupted") {
					msg = "interrupted"
				}
				fmt.Fprintf(e.stderr, "lrstream %s: %s\n", c.name, msg)
				return 130
			default:
				fmt.Fprintf(e.stderr, "lrstream %s: %s\n", c.name, tidyError(c.name, err))
				return 1
			}
		}
	}
	unknownCommand(e.stderr, args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lrstream <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'lrstream help <command>' for a command's flags, 'lrstream --version' for the version.")
}
