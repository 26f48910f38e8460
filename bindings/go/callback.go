package dlbridge

// The release callback of buffers over Go memory (Wrap), called by the
// library exactly once, on whichever thread lets go of the memory last (a
// native library's thread included). A file with an //export may declare
// but not define C functions in its preamble, hence this file of its own.

// #include <stdint.h>
import "C"

import "runtime/cgo"

//export dlbgoRelease
func dlbgoRelease(handle C.uintptr_t) {
	h := cgo.Handle(handle)
	h.Value().(*pinned).pin.Unpin()
	h.Delete()
	wrapped.Add(-1)
}
