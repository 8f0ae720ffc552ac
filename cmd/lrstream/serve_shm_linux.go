//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// shmSupported says whether serve can map a client's shared-memory arena
// here (Linux: memfd, SCM_RIGHTS).
const shmSupported = true

// fdReader reads a connection's bytes and keeps the file descriptors that
// arrive with them (SCM_RIGHTS; the hello's memfd). The descriptors are
// received close-on-exec.
type fdReader struct {
	conn *net.UnixConn
	oob  []byte
	fds  []int
}

// maxHelloFDs bounds the descriptors kept from a hello (one is used).
const maxHelloFDs = 4

func newFDReader(conn *net.UnixConn) *fdReader {
	return &fdReader{conn: conn, oob: make([]byte, unix.CmsgSpace(maxHelloFDs*4))}
}

func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, _, _, err := r.conn.ReadMsgUnix(p, r.oob)
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn]); perr == nil {
			for i := range msgs {
				fds, ferr := unix.ParseUnixRights(&msgs[i])
				if ferr != nil {
					continue
				}
				for _, fd := range fds {
					if len(r.fds) < maxHelloFDs {
						r.fds = append(r.fds, fd)
					} else {
						unix.Close(fd) // a client cannot make the server hold many
					}
				}
			}
		}
	}
	if n == 0 && err == nil && len(p) > 0 {
		err = io.EOF // ReadMsgUnix reports the end of a stream as 0 bytes
	}
	return n, err
}

// closeFDs closes the descriptors received so far.
func (r *fdReader) closeFDs() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}

// mapArena maps a client's arena: fd must be a memfd sealed against
// shrinking (so the mapping cannot lose its pages under the server) and
// of exactly size bytes.
func mapArena(fd int, size int64) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: the descriptor is not a memfd (F_GET_SEALS: %w)", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("shm: the memfd is not sealed against shrinking (F_SEAL_SHRINK)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Size != size {
		return nil, fmt.Errorf("shm: the memfd has %d bytes, the hello says %d", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mapping the memfd: %w", err)
	}
	return mem, nil
}

// unmapArena unmaps what mapArena mapped.
func unmapArena(mem []byte) { _ = unix.Munmap(mem) }
