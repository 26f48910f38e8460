package dlbridge

// One versioned export ended by its deleter: from Go (Export, then Close,
// which runs the deleter), and the same two C calls in a C loop in the same
// process (testlib.ExportDeleteLoop), the yardstick. bench/README.md, "Go:
// export and deleter", has the command and the figures.

import (
	"testing"

	"dlbridge.dev/dlbridge/internal/testlib"
)

func BenchmarkExportDeleteGo(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	for b.Loop() {
		t, err := buf.Export(nil)
		if err != nil {
			b.Fatal(err)
		}
		t.Close()
	}
}

func BenchmarkExportDeleteC(b *testing.B) {
	buf := must(Alloc("float32", 16, 16))
	defer buf.Close()
	b.ResetTimer()
	if s := testlib.ExportDeleteLoop(buf.Pointer(), b.N); s != 0 {
		b.Fatal(Status(s))
	}
}
