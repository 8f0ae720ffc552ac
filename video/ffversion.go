package video

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lrstream/lrstream/fetch"
)

// DecoderIdentity is implemented by decoders whose frames may differ from
// one build to another (FFmpeg's scaler): Identity names the build, so a
// frame cache keeps the frames of different builds apart.
type DecoderIdentity interface {
	Identity(ctx context.Context) (string, error)
}

// Identity names this FFmpeg build: `ffmpeg -version`'s lines naming the
// program and its libraries (libavcodec, libswscale, …), which change
// when any of them is upgraded. It runs ffmpeg once.
func (d *FFmpeg) Identity(context.Context) (string, error) {
	d.idOnce.Do(func() {
		cmd := command(d.Path, "-hide_banner", "-version")
		out, err := cmd.Output()
		if err != nil {
			d.idErr = fmt.Errorf("%s -version: %w", d.Path, err)
			return
		}
		var keep [][]byte
		for _, line := range bytes.Split(out, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("ffmpeg version")) || bytes.HasPrefix(line, []byte("lib")) {
				keep = append(keep, bytes.TrimSpace(line))
			}
		}
		if len(keep) == 0 {
			d.idErr = fmt.Errorf("%s -version: no version line in %q", d.Path, firstLine(out))
			return
		}
		d.id = string(bytes.Join(keep, []byte("\n")))
	})
	return d.id, d.idErr
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// IdentityKey names this FFmpeg build without running it: the size,
// modification and change times and inode of the ffmpeg executable and of
// the libav*/libsw*/libpostproc libraries it links (its ELF DT_NEEDED
// entries, found in the directories the dynamic loader searches by
// default). ok is false when the executable is not a dynamic ELF file or a
// library is not found: then only Identity can name the build. A frame
// cache keeps Identity's answer under this key so that later processes
// need not start ffmpeg to learn it.
func (d *FFmpeg) IdentityKey() (string, bool) {
	exe, err := filepath.EvalSymlinks(d.Path)
	if err != nil {
		return "", false
	}
	f, err := elf.Open(exe)
	if err != nil {
		return "", false
	}
	libs, err := f.ImportedLibraries()
	f.Close()
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !statKey(&b, exe) {
		return "", false
	}
	n := 0
	for _, lib := range libs {
		if !strings.HasPrefix(lib, "libav") && !strings.HasPrefix(lib, "libsw") && !strings.HasPrefix(lib, "libpostproc") {
			continue
		}
		found := false
		for _, dir := range libDirs {
			if p, err := filepath.EvalSymlinks(filepath.Join(dir, lib)); err == nil && statKey(&b, p) {
				found = true
				break
			}
		}
		if !found {
			return "", false
		}
		n++
	}
	if n == 0 && os.Getenv("LD_LIBRARY_PATH") != "" {
		return "", false
	}
	return b.String(), true
}

// libDirs are the directories the dynamic loader searches by default for
// the libraries of a system FFmpeg (a build elsewhere, LD_LIBRARY_PATH or
// an rpath, finds no library here: IdentityKey then declines).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"}

// statKey appends p's stamp (fetch.FileStamp) to b.
func statKey(b *strings.Builder, p string) bool {
	st, ok := fetch.FileStamp(p)
	if ok {
		b.WriteString(st)
		b.WriteByte('\n')
	}
	return ok
}
