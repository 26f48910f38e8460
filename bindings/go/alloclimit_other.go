//go:build !linux

package dlbridge

// allocLimit is the most bytes Alloc asks Go for: elsewhere than Linux,
// what a Go slice can hold.
func allocLimit() uint64 { return uint64(^uintptr(0)>>1) - 64 }
