package prerender

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

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
