//go:build !unix

package framecache

import "time"

// cpuTime is unknown here: the benchmarks' CPU figure is then 0.
func cpuTime() time.Duration { return 0 }
