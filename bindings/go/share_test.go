package dlbridge

// Tickets between Go and a Python process (the dlbridge package of the
// build under test, DLB_TEST_PYTHONPATH; the interpreter DLB_TEST_PYTHON,
// default /usr/bin/python3): each side maps the other's memory without a
// copy, writes into it, and the first sees the write. Python reads and
// writes the raw memory at the tensor's data pointer (ctypes), not through
// another DLPack consumer. Each ticket is opened once.

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func python(t *testing.T, code string, args ...string) *exec.Cmd {
	t.Helper()
	path := os.Getenv("DLB_TEST_PYTHONPATH")
	if path == "" {
		t.Fatal("DLB_TEST_PYTHONPATH must name the Python package of the build under test (<build>/python)")
	}
	py := os.Getenv("DLB_TEST_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	cmd := exec.Command(py, append([]string{"-c", code}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = os.Stderr
	return cmd
}

func TestAPythonProcessMapsAGoTicketAndWritesIntoIt(t *testing.T) {
	noLeaks(t)
	b := must(AllocShared("float32", 2, 2))
	defer b.Close()
	if err := Write(b, func(x []float32) { copy(x, []float32{1, 2, 3, 4}) }); err != nil {
		t.Fatal(err)
	}
	ticket := must(b.Ticket(0))
	out, err := python(t, `
import ctypes, sys, dlbridge
u = dlbridge._share._rebuild(bytes.fromhex(sys.argv[1]))  # what unpickling a ticket calls
assert u.shape == (2, 2) and u.dtype == "float32", (u.shape, u.dtype)
x = (ctypes.c_float * 4).from_address(u.data_ptr)
assert list(x) == [1.0, 2.0, 3.0, 4.0], list(x)
for i in range(4):
    x[i] *= -10
print("ok")
`, hex.EncodeToString(ticket)).Output()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python: %v: %q", err, out)
	}
	if x := must(Copy[float32](b)); fmt.Sprint(x) != "[-10 -20 -30 -40]" {
		t.Fatalf("the Python process's write is not seen: %v", x)
	}
}

func TestGoMapsAPythonTicketAndPythonSeesTheWrite(t *testing.T) {
	noLeaks(t)
	cmd := python(t, `
import ctypes, sys, numpy as np, dlbridge
t = dlbridge.share(np.arange(6, dtype=np.float64))
rebuild, (ticket,) = dlbridge._share._reduce(t)  # what a multiprocessing pickle carries
print(ticket.hex(), flush=True)
sys.stdin.readline()
print(" ".join(str(v) for v in (ctypes.c_double * 6).from_address(t.data_ptr)), flush=True)
`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // a failure must not leave it waiting
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatal("no ticket from the Python process")
	}
	ticket := must(hex.DecodeString(lines.Text()))
	b := must(OpenTicket(ticket, 0))
	var mapped string
	err := Write(b, func(x []float64) {
		mapped = fmt.Sprint(x)
		for i := range x {
			x[i] += 0.5
		}
	})
	if err != nil || mapped != "[0 1 2 3 4 5]" {
		t.Fatalf("mapped %v (%v)", mapped, err)
	}
	b.Close()
	fmt.Fprintln(stdin, "done")
	if !lines.Scan() || lines.Text() != "0.5 1.5 2.5 3.5 4.5 5.5" {
		t.Fatalf("the Python process saw %q", lines.Text())
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
