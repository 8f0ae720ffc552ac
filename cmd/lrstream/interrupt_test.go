package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startStream runs `lrstream stream ARGS` (the test binary) with its
// stdout on a pipe and returns the command, the pipe's reader and stderr.
func startStream(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, func() error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(testBinary, append([]string{"stream"}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out), out.Close, &errb
}

// exitCode waits for cmd (at most 30 s) and returns its exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("lrstream did not exit")
	}
	return cmd.ProcessState.ExitCode()
}

// TestStreamInterruptedInBand: SIGINT/SIGTERM end the stream with an
// in-band error saying the server was interrupted (not "context
// canceled"), and status 130 (issue 24 item 11).
func TestStreamInterruptedInBand(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGINT, "lrstream stream was interrupted (interrupt signal received)"},
		{syscall.SIGTERM, "lrstream stream was interrupted (terminated signal received)"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			cmd, r, _, errb := startStream(t, "--format", "jsonl", "--epochs", "0", "--batch-size", "8", "--cameras", "none", "-q")
			for range 3 {
				if _, err := r.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var last string
			for {
				line, err := r.ReadString('\n')
				if line != "" {
					last = line
				}
				if err != nil {
					break
				}
			}
			var m struct{ Type, Message string }
			if err := json.Unmarshal([]byte(last), &m); err != nil || m.Type != "error" || !strings.Contains(m.Message, tc.want) {
				t.Fatalf("last message %q (%v), want an error with %q", last, err, tc.want)
			}
			if code := exitCode(t, cmd); code != 130 || !strings.Contains(errb.String(), "lrstream stream: interrupted") {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
		})
	}
}

// TestStreamReaderClosed: a reader closing the pipe early ends the stream
// quietly with status 0 (as `head` ends a producer, and so that `stream |
// head` passes under pipefail), and the summary line says why it stopped
// short (issue 24 item 11).
func TestStreamReaderClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		summary bool
	}{
		{"summary", nil, true},
		{"quiet", []string{"-q"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, r, closeOut, errb := startStream(t, append([]string{"--format", "jsonl", "--epochs", "0", "--batch-size", "8", "--cameras", "none"}, tc.args...)...)
			for range 3 {
				if _, err := r.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			closeOut()
			if code := exitCode(t, cmd); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			stderr := errb.String()
			if got := strings.Contains(stderr, "stopped: the reader closed stdout"); got != tc.summary {
				t.Fatalf("stderr %q: note %t, want %t", stderr, got, tc.summary)
			}
			if strings.Contains(stderr, "lrstream stream:") {
				t.Fatalf("an error on stderr: %q", stderr)
			}
		})
	}
}
