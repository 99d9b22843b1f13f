"""tools/figures/open_problems.py: the price-of-deadlock-freedom table and figure on a tiny zoo."""

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from figures import open_problems  # noqa: E402


def test_pdf_table_and_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(open_problems, "PDF_ZOO", ([], [("torus:4x4", ("updown", "coordinate"))]))
    monkeypatch.setattr(open_problems, "PDF_ACCEPT", ([], []))   # the CLI and verify: test_mcf_df.py
    open_problems.pdf(tmp_path, True)
    assert (tmp_path / "pdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "pdf.csv") as f:
        rows = {(r["family"], int(r["layers"])): r for r in csv.DictReader(f)}
    # torus:4x4: MCF 8 link-times.  One dateline per ring (coordinate, K = 1): 10; two layers: 8.
    # up*/down* from node 0 alone: 16.25; from node 0 and its antipode 10: 8
    assert float(rows[("coordinate", 1)]["df_time"]) == pytest.approx(10.0, rel=1e-7)
    assert float(rows[("updown", 1)]["df_time"]) == pytest.approx(16.25, rel=1e-7)
    for family in ("updown", "coordinate"):
        assert float(rows[(family, 2)]["price"]) == pytest.approx(1.0, rel=1e-7)
        for K in (1, 2):
            r = rows[(family, K)]
            assert float(r["bound_price"]) <= float(r["price"]) * (1 + 1e-9)
    with open(tmp_path / "pdf-accept.csv") as f:
        assert next(csv.reader(f)) == open_problems.ACCEPT_HEADER
