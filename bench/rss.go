package bench

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// resetPeakRSS resets the kernel's resident set high-water mark (VmHWM) to
// the current RSS (Linux; a no-op elsewhere).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM from /proc/self/status in bytes, or -1.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v) // "123456 kB"
			if len(f) >= 1 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return -1
}

// cpuTime returns the process's user + system CPU time so far, plus that
// of its terminated children (the ffmpeg processes decoding camera
// frames), 0 where the platform cannot tell.
func cpuTime() time.Duration {
	var ru, ch syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ch); err == nil {
		t += time.Duration(ch.Utime.Nano() + ch.Stime.Nano())
	}
	return t
}
