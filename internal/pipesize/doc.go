// Package pipesize enlarges the kernel buffer of a pipe, so that a writer
// of large messages (a 640×480 RGB frame is 921,600 bytes; a camera batch
// many of them) blocks and wakes its reader less often than with Linux's
// default 64 KiB.
package pipesize

// MiB is the size lrstream asks for: Linux's default pipe-max-size.
const MiB = 1 << 20
