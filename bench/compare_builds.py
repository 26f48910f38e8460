"""The manylinux wheel's library (Zig, glibc 2.28, static libc++) against the
system build (Debian's g++ 12, libstdc++), side by side in one run.

    python3 bench/compare_builds.py WHEEL [--rounds N] [--copy-filter REGEX]

WHEEL is the x86-64 wheel of scripts/python-wheel. The benchmark programs
are those of scripts/bench-build (build/bench, release, g++): bench_export and
bench_copy talk to the library through its C ABI only, so the same binary
runs against either library, chosen with LD_LIBRARY_PATH (the programs'
RUNPATH comes after it). Each round starts fresh processes for both
libraries, in alternating order; the figure of a benchmark is the ratio
wheel / system of its real time, taken round by round (paired), printed as
median and range over the rounds. Also printed: the libraries' and wheels'
sizes, and the time of `python3 -c "import dlbridge"` in fresh processes
(the system build's working copy of the package against the wheel
installed in a venv), median and range.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_bench(program, libdir, extra):
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    out = subprocess.run([str(program), "--benchmark_format=json"] + extra, env=env, check=True,
                         capture_output=True, text=True).stdout
    return {b["name"]: b["real_time"] for b in json.loads(out)["benchmarks"] if b.get("run_type") != "aggregate"}


def spread(values):
    return "%.3f (%.3f-%.3f)" % (statistics.median(values), min(values), max(values))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--copy-filter", default="^BM_(Contiguous/(1048576|16777216)|Transposed/(512|4096)|Reversed/1024|EveryOther/2048|TransposedWidth/(4|8)|ToHostTransposed/1024)/1/|^BM_Swapped/4096/[01]/1/")
    args = ap.parse_args()
    bench_dir = pathlib.Path(subprocess.run(["bash", str(ROOT / "scripts/bench-build")], check=True,
                                            capture_output=True, text=True, cwd=ROOT).stdout.split()[-1])
    bench_dir = (ROOT / bench_dir).resolve()
    system_lib = bench_dir / "src"
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="dlbridge-compare."))
    with zipfile.ZipFile(args.wheel) as zf:
        zf.extractall(tmp / "wheel")
    wheel_lib = tmp / "wheel" / ".dlbridge.mesonpy.libs"
    sys_so = (system_lib / "libdlbridge.so.0").resolve()
    print("libdlbridge.so.0: system build %d bytes, wheel (Zig) %d bytes; wheel %s %d bytes" % (
        sys_so.stat().st_size, (wheel_lib / "libdlbridge.so.0").stat().st_size,
        os.path.basename(args.wheel), os.path.getsize(args.wheel)))

    programs = [(bench_dir / "bench" / "bench_export", []),
                (bench_dir / "bench" / "bench_copy", ["--benchmark_filter=" + args.copy_filter])]
    ratios = {}
    absolute = {"system": {}, "wheel": {}}
    for r in range(args.rounds):
        order = [("system", system_lib), ("wheel", wheel_lib)]
        if r % 2:
            order.reverse()
        got = {}
        for label, libdir in order:
            got[label] = {}
            for program, extra in programs:
                got[label].update(run_bench(program, libdir, extra))
        for name in got["system"]:
            if name in got["wheel"]:
                ratios.setdefault(name, []).append(got["wheel"][name] / got["system"][name])
                for label in ("system", "wheel"):
                    absolute[label].setdefault(name, []).append(got[label][name])
        print("round %d of %d done" % (r + 1, args.rounds), file=sys.stderr)

    print("\n%-52s %14s %14s  %s" % ("benchmark (real time, ns)", "system", "wheel (Zig)", "wheel/system median (range)"))
    for name, values in ratios.items():
        print("%-52s %14.1f %14.1f  %s" % (name, statistics.median(absolute["system"][name]),
                                          statistics.median(absolute["wheel"][name]), spread(values)))
    worst = max(statistics.median(v) for v in ratios.values())
    print("\nslowest median ratio: %.3f over %d benchmarks, %d rounds" % (worst, len(ratios), args.rounds))

    # import time, fresh processes: the working copy with the system library,
    # and the wheel installed in a venv.
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--disable-pip-version-check", args.wheel], check=True)
    cases = {"system": ([sys.executable, "-c", "import dlbridge"], dict(os.environ, PYTHONPATH=str(bench_dir / "python"))),
             "wheel": ([str(venv / "bin/python"), "-c", "import dlbridge"],
                       {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})}
    times = {"system": [], "wheel": []}
    for _ in range(2 * args.rounds + 1):
        for label, (cmd, env) in cases.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, cwd=tmp)
            times[label].append((time.perf_counter() - t0) * 1e3)
    print("python3 -c 'import dlbridge' (ms, whole process): system %s, wheel %s" % (
        spread(times["system"][1:]), spread(times["wheel"][1:])))


if __name__ == "__main__":
    main()
