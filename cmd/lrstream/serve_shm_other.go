//go:build !linux

package main

import (
	"errors"
	"net"
)

// shmSupported says whether serve can map a client's shared-memory arena
// here: only on Linux.
const shmSupported = false

// fdReader reads a connection's bytes (descriptors are not received here).
type fdReader struct {
	conn *net.UnixConn
	fds  []int
}

func newFDReader(conn *net.UnixConn) *fdReader { return &fdReader{conn: conn} }
func (r *fdReader) Read(p []byte) (int, error) { return r.conn.Read(p) }
func (r *fdReader) closeFDs()                  {}

func mapArena(int, int64) ([]byte, error) {
	return nil, errors.New("shm: not supported on this system")
}
func unmapArena([]byte) {}
