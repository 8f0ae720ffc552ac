package pipesize

import (
	"os"
	"runtime"
	"testing"
)

func TestGrow(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	got := Grow(w, MiB)
	if runtime.GOOS == "linux" && !got {
		t.Skip("the kernel refused a 1 MiB pipe (pipe-max-size or quota): nothing to check")
	}
	if runtime.GOOS != "linux" && got {
		t.Fatal("Grow reported success where pipes cannot be resized")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Grow(f, MiB) {
		t.Fatal("a regular file is not a pipe")
	}
}
