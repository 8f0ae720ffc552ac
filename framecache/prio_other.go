//go:build !linux

package framecache

// lowerThreadPriority does nothing where a thread's priority cannot be set alone.
func lowerThreadPriority() {}
