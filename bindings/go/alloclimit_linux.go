package dlbridge

import "syscall"

// allocLimit is the most bytes Alloc asks Go for: the machine's memory and
// swap, the size above which Linux refuses a single allocation under its
// default overcommit rule.
func allocLimit() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return uint64(^uintptr(0) >> 1)
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	return (uint64(si.Totalram) + uint64(si.Totalswap)) * unit
}
