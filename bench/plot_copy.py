#!/usr/bin/python3
"""Draws copy bandwidth against size from bench/copy_numpy.py's JSON.

One panel per view (contiguous, transposed, reversed); in each, the
dlbridge engine beside memcpy and numpy, bandwidth in GB/s of the compact
result against the bytes copied.

Usage:
  /usr/bin/python3 bench/plot_copy.py [--in build/bench-results/copy.json]
      [--out docs/copy-bandwidth.png]
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

VIEWS = [
    ("contiguous", "contiguous: a"),
    ("transposed", "transposed: a.T"),
    ("reversed", "reversed: a[::-1, ::-1]"),
]
METHODS = [
    ("memcpy", "memcpy (same bytes)", "0.45", "--", "s"),
    ("numpy", "numpy ascontiguousarray / copy()", "tab:orange", "-", "v"),
    ("numpy_into", "numpy copyto, preallocated", "tab:red", ":", "^"),
    ("dlbridge", "dlbridge dlb_copy_to_contiguous", "tab:blue", "-", "o"),
]


def human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return "%g %s" % (nbytes, unit)
        nbytes /= 1024
    return str(nbytes)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in", dest="inp", default="build/bench-results/copy.json")
    p.add_argument("--out", default="docs/copy-bandwidth.png")
    args = p.parse_args()

    with open(args.inp) as f:
        data = json.load(f)
    rows = data["results"]
    summary = data.get("summary", {})

    fig, axes = plt.subplots(1, len(VIEWS), figsize=(15, 5.2), sharey=True)
    for ax, (view, title) in zip(axes, VIEWS):
        for method, label, color, style, marker in METHODS:
            pts = sorted((r["bytes"], r["gb_per_s"]) for r in rows
                         if r["view"] == view and r["method"] == method and r["gb_per_s"] is not None)
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, style, color=color, marker=marker, markersize=5, linewidth=2 if method == "dlbridge" else 1.5,
                    label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(title + "  (float64, k x k)")
        ax.set_xlabel("bytes copied")
        ticks = sorted({r["bytes"] for r in rows if r["view"] == view})
        ax.set_xticks(ticks)
        ax.set_xticklabels([human(t) for t in ticks], rotation=45, ha="right")
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("bandwidth of the compact result, GB/s (log scale)")
    for ax in axes:
        ax.set_yticks([0.5, 1, 2, 5, 10, 20, 50, 100])
    axes[0].legend(loc="lower left", fontsize=9)
    note = []
    if summary.get("contiguous_engine_vs_memcpy") is not None:
        note.append("contiguous, largest size: engine at %.2f of memcpy's bandwidth"
                    % summary["contiguous_engine_vs_memcpy"])
    if summary.get("transposed_numpy_over_engine") is not None:
        note.append("transposed %dx%d: engine %.1fx faster than numpy.ascontiguousarray"
                    % (summary["largest_k"], summary["largest_k"], summary["transposed_numpy_over_engine"]))
    fig.suptitle("dlbridge copy engine: copy into a compact row-major buffer" +
                 ("\n" + "; ".join(note) if note else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
