"""Shared output helpers for ``tools/reproduce.py`` figures: CSV and PNG, written atomically."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from a2a_compiler.files import atomic_write, write_png  # noqa: E402,F401 (write_png: re-exported to the figures)


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    """Write ``rows`` under ``header``; floats keep 6 significant digits, missing values are empty."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in rows:
        w.writerow(["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in row])
    return atomic_write(path, buf.getvalue())


def figure(ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A new matplotlib figure with ``nrows x ncols`` axes."""
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)

