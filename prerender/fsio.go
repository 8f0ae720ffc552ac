package prerender

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MaxIndexBytes bounds the size of an index.json (or rank index) that
// verify, replay, resume and finalize read: far above any real index (a
// shard entry is ~300 bytes: 256 MiB is ~800,000 shards), far below what
// would exhaust memory.
const MaxIndexBytes = 256 << 20

// openRegular opens path for reading only if it is a regular file (after
// following symlinks). It opens with O_NONBLOCK, so a FIFO planted in
// place of an index or shard does not block the open forever (waiting for
// a writer), and it refuses FIFOs, devices (a symlink to /dev/zero),
// sockets and directories with an error naming the file and its type.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (%s)", path, fileKind(st.Mode()))
	}
	return f, st, nil
}

// fileKind names a non-regular file's type for errors.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}

// readRegular reads the regular file path whole, refusing one larger than
// limit bytes (checked before reading, and while reading in case it
// grows).
func readRegular(path string, limit int64) ([]byte, error) {
	f, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d bytes it may be", path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew beyond the %d bytes it may be", path, limit)
	}
	return data, nil
}

// writeAtomic replaces dir/name with data: it writes dir/name.tmp, fsyncs
// it, renames it over dir/name and fsyncs dir, so a crash leaves either
// the old or the new file, never a mix.
func writeAtomic(dir, name string, data []byte) error {
	final := filepath.Join(dir, name)
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return commit(dir, tmp, final)
}

// commit renames a fully written and synced temporary file to its final
// name and makes the rename durable.
func commit(dir, tmp, final string) error {
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so renames in it survive a crash. File
// systems that cannot sync directories are tolerated.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// lock takes an exclusive advisory lock on dir/name (created if missing)
// so two processes never write the same rank's files at once. It returns
// the function releasing it. File systems without flock support (some
// network file systems) are tolerated: the run goes on unlocked.
func lock(dir, name string) (func(), error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("another lrstream prerender is writing these files in %s (lock %s is held)", dir, name)
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EINVAL):
		// No locking on this file system.
	default:
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
