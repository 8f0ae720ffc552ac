package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/sink"
)

// lockedBuffer is a bytes.Buffer safe for a server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeLogLevel: serve's -q and --log-level silence the INFO lines of
// every client connection; warnings (the shuffle buffer lowered) go
// through the same logger, once for all clients, so -q keeps them and
// --log-level error drops them (issue 24 item 8).
func TestServeLogLevel(t *testing.T) {
	tight := []string{"--shuffle", "--shuffle-buffer-bytes", "10KB", "--batch-size", "64"}
	for _, tc := range []struct {
		name       string
		args       []string
		info, warn bool
	}{
		{"default", nil, true, false},
		{"-q", []string{"-q"}, false, false},
		{"--log-level warn", []string{"--log-level", "warn"}, false, false},
		{"lowered buffer", tight, true, true},
		{"lowered buffer -q", append([]string{"-q"}, tight...), false, true},
		{"lowered buffer --log-level error", append([]string{"--log-level", "error"}, tight...), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errb lockedBuffer
			e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &errb, getenv: func(string) string { return "" }}
			_, sock, stop := startServerEnv(t, e, append([]string{"--cameras", "none"}, tc.args...)...)
			for range 2 { // two clients: the warning is logged once
				c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
				st, err := sink.Decode(c)
				c.Close()
				if err != nil || st.End == nil {
					t.Fatalf("client: %v", err)
				}
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			out := errb.String()
			if got := strings.Contains(out, "level=INFO"); got != tc.info {
				t.Errorf("INFO lines: %t, want %t:\n%s", got, tc.info, out)
			}
			warns := strings.Count(out, `level=WARN msg="shuffle buffer lowered`)
			if want := map[bool]int{true: 1}[tc.warn]; warns != want {
				t.Errorf("%d buffer warnings (logger format), want %d:\n%s", warns, want, out)
			}
		})
	}
	if _, errb, code := runCmd(t, "serve", "--socket", "x", "--log-level", "loud"); code != 1 || !strings.Contains(errb, "--log-level \"loud\"") {
		t.Errorf("--log-level loud: exit %d, stderr %q", code, errb)
	}
}

// TestStreamBufferWarning: stream's shuffle-buffer warning is in its
// notes' format, silenced by -q, and not given when the lowered buffer
// still holds the whole selection (a tiny dataset).
func TestStreamBufferWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"lowered below the selection", []string{"--shuffle-buffer-bytes", "10KB"}, true},
		{"quiet", []string{"--shuffle-buffer-bytes", "10KB", "-q"}, false},
		{"lowered, still the whole dataset", []string{"--shuffle-buffer-bytes", "1MB", "--shuffle-buffer", "100000"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errb, code := runCmd(t, append([]string{"stream", "--format", "jsonl", "--shuffle", "--cameras", "none"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			if got := strings.Contains(errb, `level=WARN msg="shuffle buffer lowered`); got != tc.warn {
				t.Errorf("warning: %t, want %t:\n%s", got, tc.warn, errb)
			}
		})
	}
}

// TestUnknownFlagAsTyped: an unknown flag is named as the user typed it.
func TestUnknownFlagAsTyped(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "-z", "d"}, "unknown flag -z\n"},
		{[]string{"stream", "--zz"}, "unknown flag --zz\n"},
		{[]string{"stream", "-zz=1"}, "unknown flag -zz\n"},
		{[]string{"gen", "--qq"}, "unknown flag --qq"},
	} {
		_, errb, code := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q lacks %q", tc.args, code, errb, tc.want)
		}
	}
}
