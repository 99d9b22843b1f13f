#!/usr/bin/env python3
"""Reproduce the papers' figures and tables, ours beside the paper's.

    python tools/reproduce.py --list
    python tools/reproduce.py FIG [FIG ...] [--quick] --out DIR
    python tools/reproduce.py --quick             # the layers figure, quick, into a temporary directory

Each figure writes ``DIR/FIG.png`` (matplotlib) and ``DIR/FIG.csv`` (our measured
values beside the paper's where it gives them); docs/results.md shows them and
says where and why our numbers differ.  ``--quick`` runs a reduced sweep that
finishes in minutes.

Figures live in ``tools/figures/*.py``: every module there has a ``FIGURES``
dict mapping a figure name to ``(function, one-line description)``, where
``function(out_dir: Path, quick: bool) -> None`` writes the files.  Not a test:
full runs take minutes to hours; run them on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The figure ``--quick`` alone runs: the quickest (seconds).
QUICK_FIGURE = "layers"


def registry() -> dict:
    """All figures of ``tools/figures``: name -> (function, description)."""
    import figures

    found = {}
    for info in sorted(pkgutil.iter_modules(figures.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"figures.{info.name}")
        for name, entry in getattr(module, "FIGURES", {}).items():
            if name in found:
                raise SystemExit(f"reproduce: figure {name!r} is defined twice")
            found[name] = entry
    return dict(sorted(found.items()))


def main(argv=None) -> int:
    figs = registry()
    listing = "\n".join(f"  {name:16s} {desc}" for name, (_, desc) in figs.items())
    parser = argparse.ArgumentParser(
        prog="reproduce.py", description=__doc__.split("\n\n")[0] + "\n\nfigures:\n" + listing,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("figures", nargs="*", metavar="FIG", help="figure names (see --list), or 'all'")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output directory (created if missing)")
    parser.add_argument("--quick", action="store_true",
                        help=f"reduced sweep that finishes in minutes; with no FIG, the quickest figure "
                             f"({QUICK_FIGURE}) into --out or a temporary directory (tests/test_tools.py runs it)")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args(argv)
    if args.quick and not args.figures and not args.list:
        with tempfile.TemporaryDirectory(prefix="reproduce-") as tmp:
            return main([QUICK_FIGURE, "--quick", "--out", str(args.out or tmp)])
    if args.list or not args.figures:
        print(listing)
        return 0 if args.list else 2
    names = list(figs) if args.figures == ["all"] else args.figures
    unknown = [n for n in names if n not in figs]
    if unknown:
        print(f"reproduce: unknown figure {unknown[0]!r}; choose from {', '.join(figs)}", file=sys.stderr)
        return 2
    if args.out is None:
        print("reproduce: --out DIR is required", file=sys.stderr)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"reproduce: cannot create {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        for name in names:
            t0 = time.perf_counter()
            print(f"reproduce: {name} ...", file=sys.stderr, flush=True)
            figs[name][0](args.out, args.quick)
            print(f"reproduce: {name} done in {time.perf_counter() - t0:.0f} s -> {args.out / name}.png, .csv",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("reproduce: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
