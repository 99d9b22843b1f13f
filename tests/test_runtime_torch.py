"""The PyTorch runtime (runtimes.torch) on gloo CPU ranks: byte-exact against dist.all_to_all_single for every
format, the drop-in under an unmodified MoE layer, and bad input as one line on every rank."""

from __future__ import annotations

import json

import pytest

import a2a_compiler
from a2a_compiler.demand import zipf_demand
from torchjobs import REPO, needs_torch, torchrun

pytestmark = needs_torch
FORMATS = {"mpi": "xml", "msccl": "xml", "oneccl": "xml", "mscclpp": "json"}
RANKS = str(REPO / "tests" / "data" / "torch_ranks.py")


def _compile(spec: str, d, **kw) -> list[str]:
    out = []
    for fmt, ext in FORMATS.items():
        out.append(str(a2a_compiler.compile(spec, fmt, max_chunks=3, **kw).write(d / f"{spec.replace(':', '-')}."
                                                                                     f"{fmt}.{ext}")))
    return out


def _exact(n: int, files: list[str], timeout: float) -> list[dict]:
    ranks = torchrun(n, RANKS, "exact", *files, timeout=timeout)
    assert [r.returncode for r in ranks] == [0] * n, ranks[0].stderr
    return [json.loads(r.stdout) for r in ranks]


@pytest.mark.parametrize("spec", ["hypercube:3", "bipartite:4"])
def test_every_format_is_byte_exact_on_8_ranks(tmp_path, spec):
    files = _compile(spec, tmp_path)
    if spec == "hypercube:3":   # the demand-aware all-to-allv: compiled for a Zipf matrix, run on any splits
        files += [str(a2a_compiler.compile(spec, fmt, demand=zipf_demand(8, 1.0, seed=1), max_chunks=4)
                      .write(tmp_path / f"zipf.{fmt}.xml")) for fmt in ("mpi", "oneccl")]
    results = _exact(8, files, 240)
    for f in files:
        got = [r[f] for r in results]
        assert {g["format"] for g in got} == {f.split(".")[-2]}
        cases = got[0]["exact"]
        assert len(cases) == 12                         # 3 dtypes x (uniform, 2 random, list form)
        assert [g["exact"] for g in got] == [dict.fromkeys(cases, True)] * 8, f


def test_every_format_is_byte_exact_on_16_ranks(tmp_path):
    files = _compile("torus:4x4", tmp_path)
    results = _exact(16, files, 420)
    for f in files:
        assert [r[f]["exact"] for r in results] == [dict.fromkeys(results[0][f]["exact"], True)] * 16, f
