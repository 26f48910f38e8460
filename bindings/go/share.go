package dlbridge

// #include <dlbridge/dlbridge.h>
import "C"

import "unsafe"

// Flags of Ticket and OpenTicket.
const (
	ShareCopyIfNeeded = uint64(C.DLB_SHARE_COPY_IF_NEEDED) // copy memory that is not shared yet
	ShareReadOnly     = uint64(C.DLB_SHARE_READ_ONLY)      // the receiver maps it read-only
)

// AllocShared allocates a zero-filled compact host tensor in memory other
// processes can map (Linux): share it with Ticket.
func AllocShared(dtype string, shape ...int64) (*Buffer, error) {
	dt, err := parseDType(dtype)
	if err != nil {
		return nil, err
	}
	ndim, dims := shapeArgs(shape)
	return made(func(out **C.dlb_buffer) C.dlb_status {
		return C.dlb_buffer_alloc_shared(C.DLDevice{device_type: C.kDLCPU}, dt, ndim, dims, out)
	})
}

// Ticket is a ticket for the buffer (dlb_share_ticket_issue): plain bytes
// for one process of this machine, which opens it once (OpenTicket here, or
// the C, Rust or Python calls) and maps the same memory. This process keeps
// the memory file until the ticket is opened or the process exits.
func (b *Buffer) Ticket(flags uint64) ([]byte, error) {
	p, err := b.acquire()
	if err != nil {
		return nil, err
	}
	defer b.done()
	var t C.dlb_share_ticket
	if err := call(func() C.dlb_status { return C.dlb_share_ticket_issue(p, C.uint64_t(flags), &t) }); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(&t.bytes[0]), C.int(t.size)), nil
}

// OpenTicket maps the memory a ticket names (dlb_share_ticket_open): a
// buffer over the same memory as the issuer's.
func OpenTicket(ticket []byte, flags uint64) (*Buffer, error) {
	var p unsafe.Pointer
	if len(ticket) > 0 {
		p = unsafe.Pointer(&ticket[0])
	}
	return made(func(out **C.dlb_buffer) C.dlb_status {
		return C.dlb_share_ticket_open(p, C.size_t(len(ticket)), C.uint64_t(flags), out)
	})
}
