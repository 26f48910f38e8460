#!/usr/bin/python3
"""Draws allocate + copy bandwidth from bench/copy_peers.py's JSON.

One panel per view (contiguous, transposed, reversed, every-other); in
each, dlbridge beside numpy and torch (colours), one line per dtype (line
styles): GB/s of the compact result against its size in bytes.

Usage:
  /usr/bin/python3 bench/plot_copy.py [--in build/bench-results/copy-peers.json]
      [--out docs/copy-bandwidth.png]
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

VIEWS = [
    ("contiguous", "contiguous: a"),
    ("transposed", "transposed: a.T"),
    ("reversed", "reversed: a[::-1, ::-1]"),
    ("every-other", "every other: a[::2, ::2]"),
]
METHODS = [("numpy", "numpy", "tab:orange"), ("torch", "torch", "tab:green"), ("dlbridge", "dlbridge", "tab:blue")]
STYLES = {"float32": (":", "v"), "float64": ("-", "o"), "complex128": ("--", "s")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--in", dest="inp", default="build/bench-results/copy-peers.json")
    p.add_argument("--out", default="docs/copy-bandwidth.png")
    args = p.parse_args()
    with open(args.inp) as f:
        data = json.load(f)
    results = data["results"]
    fig, axes = plt.subplots(1, len(VIEWS), figsize=(16, 4.6), sharey=True)
    for ax, (view, title) in zip(axes, VIEWS):
        for method, label, colour in METHODS:
            for dtype, (ls, marker) in STYLES.items():
                pts = sorted((r["bytes"], r["bytes"] / r["median_s"][method] / 1e9) for r in results
                             if r["view"] == view and r["dtype"] == dtype and method in r["median_s"])
                if not pts:
                    continue
                ax.plot([x for x, _ in pts], [y for _, y in pts], ls=ls, marker=marker, color=colour,
                        label="%s %s" % (label, dtype), markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_title(title)
        ax.set_xlabel("bytes of the copy")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("GB/s, allocate + copy (median)")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.suptitle("A fresh compact copy of a view: dlbridge.from_dlpack(copy=True) beside numpy and torch "
                 "(%s, %s CPUs)" % (data.get("machine", "?"), data.get("cpus", "?")))
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print("plot_copy.py: wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
