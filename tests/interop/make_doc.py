#!/usr/bin/env python3
"""Writes docs/interop.md and docs/interop.png from one run of the interop matrix.

    PYTHONPATH=<build>/python /usr/bin/python3 tests/interop/make_doc.py [--json FILE] [--peers-python PY]

Runs tests/interop/matrix.py with the peer interpreter (scripts/peers-env)
unless --json names the result of an earlier run; draws the picture with
matplotlib (Debian's /usr/bin/python3 has it).
"""

import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import expectations  # noqa: E402
import matrix  # noqa: E402


def _peers_python():
    out = subprocess.run([os.path.join(ROOT, "scripts", "peers-env")], capture_output=True,
                         text=True, check=True).stdout
    return os.path.join(out.strip().splitlines()[-1], "bin", "python")


def _tally(doc):
    """(producer, consumer) -> {path: {"zero-copy": n, "copy": n}, "cases": applicable},
    (path, reason) -> {(producer, consumer): failures}, and
    (path, copy reason) -> {(producer, consumer): copies}."""
    cells = collections.defaultdict(lambda: {"direct": collections.Counter(), "dlbridge": collections.Counter(),
                                             "cases": 0})
    reasons = collections.defaultdict(collections.Counter)
    copies = collections.defaultdict(collections.Counter)
    for row in expectations.classify(doc):
        producer, consumer, case, path, status, reason, _ = row
        cell = cells[(producer, consumer)]
        if status == "n/a":
            continue
        if path == "direct":
            cell["cases"] += 1
        if status in expectations.WORKS:
            cell[path][status] += 1
            if status == "copy" and reason:
                copies[(path, reason)][(producer, consumer)] += 1
        else:
            reasons[(path, reason or "unexplained")][(producer, consumer)] += 1
    return cells, reasons, copies


def _works(cell, path):
    return cell[path]["zero-copy"] + cell[path]["copy"]


def _cell_text(cell, path):
    """"zero-copy+copies/cases", or "works/cases" when none copies."""
    z, c = cell[path]["zero-copy"], cell[path]["copy"]
    return "%d+%d/%d" % (z, c, cell["cases"]) if c else "%d/%d" % (z, cell["cases"])


def _picture(doc, cells, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    producers, consumers = doc["producers"], doc["consumers"]
    fig, axes = plt.subplots(1, 2, figsize=(15, 7.4), constrained_layout=True)
    for ax, key, title in ((axes[0], "direct", "directly: consumer.from_dlpack(x)"),
                           (axes[1], "dlbridge", "through dlbridge: consumer.from_dlpack(dlbridge.from_dlpack(x))")):
        grid = []
        for p in producers:
            row = []
            for c in consumers:
                cell = cells[(p, c)]
                row.append(_works(cell, key) / cell["cases"] if cell["cases"] else float("nan"))
            grid.append(row)
        im = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1)
        ax.set_xticks(range(len(consumers)), consumers, rotation=40, ha="right")
        ax.set_yticks(range(len(producers)), producers)
        ax.set_xlabel("consumer")
        ax.set_ylabel("producer")
        ax.set_title(title, fontsize=10)
        for i, p in enumerate(producers):
            for j, c in enumerate(consumers):
                cell = cells[(p, c)]
                copied = cell[key]["copy"]
                ax.text(j, i, "%d/%d%s" % (_works(cell, key), cell["cases"], "\n%d copied" % copied if copied else ""),
                        ha="center", va="center", fontsize=6.5 if copied else 7.5, linespacing=1.0)
    fig.colorbar(im, ax=axes, shrink=0.7, label="share of applicable cases that work (zero-copy or a correct copy)")
    fig.suptitle("DLPack interop on the CPU: cases that work (zero-copy, or a correct copy: how many "
                 "copied), of those the producer can make; the rest fail", fontsize=11)
    fig.savefig(path, dpi=110)


def _pair_counts(doc, cells):
    applicable = [k for k, v in cells.items() if v["cases"]]
    full = {key: sum(1 for k in applicable if _works(cells[k], key) == cells[k]["cases"])
            for key in ("direct", "dlbridge")}
    some = {key: sum(1 for k in applicable if _works(cells[k], key) > 0) for key in ("direct", "dlbridge")}
    return len(applicable), full, some


def _pairs_text(pairs):
    return ", ".join("%s -> %s (%d)" % (p, c, n) for (p, c), n in sorted(pairs.items()))


def write_markdown(doc, cells, reasons, copies, out):
    producers, consumers = doc["producers"], doc["consumers"]
    n_pairs, full, some = _pair_counts(doc, cells)
    totals = collections.Counter()
    for row in expectations.classify(doc):
        if row[4] != "n/a":
            totals[(row[3], row[4] if row[4] in expectations.WORKS else "fail")] += 1
    versions = ", ".join("%s %s" % (k, v) for k, v in doc["versions"].items() if v)

    def outcome_counts(path):
        n = sum(totals[(path, o)] for o in ("zero-copy", "copy", "fail"))
        return "%d zero-copy, %d copied, %d fail, of %d" % (
            totals[(path, "zero-copy")], totals[(path, "copy")], totals[(path, "fail")], n)

    lines = [
        "# Interop with today's DLPack frameworks",
        "",
        "Generated by `tests/interop/make_doc.py` from one run of the interop matrix",
        "(`tests/interop/matrix.py`, tested by `scripts/test.d/42-interop.sh`); do not edit by hand.",
        "",
        "Versions: %s (CPU only, CPython 3.12, peer environment of `scripts/peers-env`)." % versions,
        "",
        "Every producer hands every consumer %d cases (%s), first directly,"
        % (len(doc["cases"]), "every dtype contiguous, and the layouts 0-d, zero-size, strided, "
           "transposed, offset and read-only for float32 and complex64"),
        "`consumer.from_dlpack(x)`, then through dlbridge,",
        "`consumer.from_dlpack(dlbridge.from_dlpack(x))`. A capsule-only producer (`*-capsule`:",
        "`tf.experimental.dlpack.to_dlpack`, `paddle.utils.dlpack.to_dlpack`, `torch.utils.dlpack.to_dlpack`)",
        "hands over the bare capsule; TensorFlow, a capsule-only consumer, gets `x.__dlpack__()`. mlx",
        "consumes with `mx.from_dlpack`, onnxruntime with `OrtValue.from_dlpack`. Cases a producer cannot",
        "make (pyarrow has only 1-D arrays, array-api-strict only the standard's dtypes, an OrtValue is",
        "dense, row-major and writable, mlx has no float8 or complex128, torch and mlx no read-only",
        "tensors) are left out of the counts.",
        "",
        "## Three outcomes",
        "",
        "Each exchange ends in one of three outcomes:",
        "",
        "- **zero-copy**: the consumer's result holds the producer's values in the producer's own",
        "  memory (or has no elements); a write into the producer's memory shows through it.",
        "- **copy**: a correct copy: the consumer's result holds the producer's values (dtype, shape",
        "  and every element's bits) in other memory. Where the consumer promises zero-copy (%s),"
        % ", ".join(sorted(matrix.ZERO_COPY_CONSUMERS)),
        "  a copy is expected only where a reason below says why; the others copy when they choose.",
        "  dlbridge copies, for instance, read-only memory for a consumer that asks for a legacy",
        "  capsule (which cannot say read-only), rather than hand it over as writable.",
        "- **fail**: the exchange raised, or handed over other values than the producer's (another",
        "  dtype, shape or element), or left the producer's tensor or a dlbridge export alive after",
        "  everything was dropped. Every failure has a named reason below.",
        "",
        "The values are checked by the value oracle (`tests/values/oracle.py`): each framework's own",
        "values of what it holds, read from its memory and never through another DLPack consumer, are",
        "compared with the producer's.",
        "",
        "Where the producer's memory does not hold its values as DLPack reads them, dlbridge copies",
        "or refuses: memory in non-native byte order (numpy's `>i8`) is converted by the copy it",
        "makes; a torch tensor whose conjugate or negative bit is set (`is_conj()`, `is_neg()`) is",
        "resolved in a copy, or refused under `copy=False` with a message naming the bit; a dtype it",
        "cannot establish (onnxruntime's float8, given as uint8 by its `numpy()`) is refused. A",
        "refusal of `dlbridge.from_dlpack` is both a `BufferError` and a `dlbridge.Error`, and keeps",
        "the producer's words.",
        "",
        "## Counts",
        "",
        "- producer/consumer pairs: %d (%d producers x %d consumers)" % (n_pairs, len(producers), len(consumers)),
        "- pairs where every case works (zero-copy or a copy) directly: %d; through dlbridge: %d"
        % (full["direct"], full["dlbridge"]),
        "- pairs where some case works directly: %d; through dlbridge: %d" % (some["direct"], some["dlbridge"]),
        "- exchanges directly: %s" % outcome_counts("direct"),
        "- exchanges through dlbridge: %s" % outcome_counts("dlbridge"),
        "- distinct reasons for the failures: %d; for the copies: %d"
        % (len({r for (_p, r) in reasons}), len({r for (_p, r) in copies})),
        "",
        "![the matrix](interop.png)",
        "",
        "## The matrix",
        "",
        "Cases that work directly / through dlbridge, of the cases the producer can make: zero-copy,",
        "or zero-copy+copied where some are copies.",
        "",
        "| producer \\ consumer | " + " | ".join(consumers) + " |",
        "|---|" + "---|" * len(consumers),
    ]
    for p in producers:
        row = []
        for c in consumers:
            cell = cells[(p, c)]
            row.append("%s / %s" % (_cell_text(cell, "direct"), _cell_text(cell, "dlbridge")))
        lines.append("| **%s** | %s |" % (p, " | ".join(row)))
    lines += ["", "## Why the rest fails", "",
              "Each reason names the side at fault; for failures through dlbridge it says why dlbridge",
              "cannot work around it. Pending: a fix planned in dlbridge itself.", ""]
    by_reason = collections.defaultdict(dict)
    for (path, reason), pairs in reasons.items():
        by_reason[reason][path] = pairs
    for reason in sorted(by_reason, key=lambda r: -sum(sum(v.values()) for v in by_reason[r].values())):
        if reason in expectations.REASONS:
            side, _regex, why, no_cure = expectations.REASONS[reason]
        else:
            side, why, no_cure = "?", "no named reason (the tests fail on this)", None
        lines.append("### `%s` (%s)" % (reason, side))
        lines.append("")
        lines.append(why)
        lines.append("")
        for path in ("direct", "dlbridge"):
            pairs = by_reason[reason].get(path)
            if pairs:
                lines.append("- %s: %s" % ("directly" if path == "direct" else "through dlbridge",
                                           _pairs_text(pairs)))
        if "dlbridge" in by_reason[reason] and no_cure:
            lines.append("- why dlbridge cannot work around it: %s" % no_cure)
        elif "dlbridge" not in by_reason[reason]:
            lines.append("- through dlbridge these cases work.")
        if reason in expectations.PENDING:
            lines.append("- pending: %s." % expectations.PENDING[reason])
        lines.append("")
    lines += ["## Why some exchanges copy", "",
              "Copies by consumers that promise zero-copy, each with its reason (the other consumers'",
              "copies are theirs to choose and are not listed).", ""]
    by_copy = collections.defaultdict(dict)
    for (path, reason), pairs in copies.items():
        by_copy[reason][path] = pairs
    for reason in sorted(by_copy):
        side, why = expectations.COPY_REASONS[reason]
        lines += ["### `%s` (%s)" % (reason, side), "", why, ""]
        for path in ("direct", "dlbridge"):
            pairs = by_copy[reason].get(path)
            if pairs:
                lines.append("- %s: %s" % ("directly" if path == "direct" else "through dlbridge",
                                           _pairs_text(pairs)))
        lines.append("")
    lines += ["## Regenerating", "",
              "```sh",
              "PYTHONPATH=build/test/python /usr/bin/python3 tests/interop/make_doc.py",
              "```", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="a matrix result to use instead of running the matrix")
    ap.add_argument("--peers-python", help="the interpreter to run the matrix with")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"))
    args = ap.parse_args()
    if args.json and os.path.exists(args.json):
        with open(args.json) as f:
            doc = json.load(f)
    else:
        python = args.peers_python or _peers_python()
        out = subprocess.run([python, os.path.join(HERE, "matrix.py")], capture_output=True,
                             text=True, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        doc = json.loads(out.stdout)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
    cells, reasons, copies = _tally(doc)
    _picture(doc, cells, os.path.join(args.out, "interop.png"))
    write_markdown(doc, cells, reasons, copies, os.path.join(args.out, "interop.md"))
    n_pairs, full, some = _pair_counts(doc, cells)
    print("pairs %d; every case works directly %d, through dlbridge %d; reasons %d, copy reasons %d"
          % (n_pairs, full["direct"], full["dlbridge"], len({r for (_p, r) in reasons}),
             len({r for (_p, r) in copies})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
