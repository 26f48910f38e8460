module dlbridge.dev/dlbridge

go 1.24
