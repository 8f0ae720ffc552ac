//go:build linux

package testslowfs

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose files are slowFiles, and whose children are nodes.
type node struct {
	*fs.LoopbackNode
	delay time.Duration
}

func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), delay: n.delay}
}

// slowFile is a loopback file whose writes sleep first.
type slowFile struct {
	*fs.LoopbackFile
	delay time.Duration
}

func (f *slowFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	time.Sleep(f.delay)
	return f.LoopbackFile.Write(ctx, data, off)
}

// PassthroughFd declines FUSE passthrough (Linux 6.9+), which would have the kernel
// write the backing file itself, never asking Write.
func (f *slowFile) PassthroughFd() (int, bool) { return 0, false }

func (f *slowFile) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	time.Sleep(f.delay)
	return f.LoopbackFile.Writev(ctx, data, off)
}

func (n *node) wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &slowFile{LoopbackFile: lf, delay: n.delay}
	}
	return fh
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, n.wrap(fh), fl, errno
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return n.wrap(fh), fl, errno
}

func mount(mnt, backing string, delay time.Duration) (func() error, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, err
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("loopback of %s: %w", backing, err)
	}
	top := &node{LoopbackNode: root.(*fs.LoopbackNode), delay: delay}
	server, err := fs.Mount(mnt, top, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, DirectMountStrict: true, FsName: "testslowfs", Name: "testslowfs"}})
	if err != nil {
		return nil, err
	}
	return server.Unmount, nil
}
