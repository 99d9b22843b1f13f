"""The PyTorch runtime (runtimes.torch) on gloo CPU ranks: byte-exact against dist.all_to_all_single for every
format, the drop-in under an unmodified MoE layer, and bad input as one line on every rank."""

from __future__ import annotations

import json
import re

import numpy as np
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


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """A 4-rank MPI path schedule (hypercube:2), an 8-rank one, a rank map naming another machine and a
    permuted one."""
    import socket

    d = tmp_path_factory.mktemp("checks")
    h2 = a2a_compiler.compile("hypercube:2", "mpi").write(d / "h2.mpi.xml")
    (d / "h2.mpi.xml.bad.map").write_text("".join(f"node-x {h}\n" for h in range(4)))
    (d / "h2.mpi.xml.perm.map").write_text("".join(f"{socket.gethostname()} {h}\n" for h in (2, 0, 3, 1)))
    return h2, a2a_compiler.compile("hypercube:3", "mpi").write(d / "h3.mpi.xml")


@pytest.fixture(scope="module")
def checks(four):
    """One 4-rank job (tests/data/torch_ranks.py ``checks``): every rank's results."""
    ranks = torchrun(4, RANKS, "checks", str(four[0]), str(four[1]), timeout=180)
    assert [r.returncode for r in ranks] == [0] * 4, ranks[0].stderr
    return [json.loads(r.stdout) for r in ranks], ranks


@pytest.mark.parametrize("case, line", [
    ("size", "the schedule is for 8 ranks but the process group has 4; launch 8 ranks (torchrun --nproc-per-node)"),
    ("rank_map", "{map}: rank 0 runs on {host!r}, which the rank map does not list; the map expects a process on "
                 "'node-x' (line 1), where none runs"),
    ("splits", "rank 0 sends rank 1 16 bytes but rank 1 expects 20"),
    ("noncontiguous", "rank 2: input is not contiguous; pass input.contiguous()"),
    ("dtype", "rank 3: input holds torch.float32 and output torch.float64; use one dtype"),
])
def test_bad_input_is_the_same_line_on_every_rank(four, checks, case, line):
    import socket

    line = line.format(map=f"{four[0]}.bad.map", host=socket.gethostname())
    assert [r[case] for r in checks[0]] == [line] * 4


def test_the_group_works_after_bad_input_and_under_a_permuted_rank_map(checks):
    assert [(r["after_errors_exact"], r["permuted_map_exact"]) for r in checks[0]] == [(True, True)] * 4


def test_the_drop_in_takes_its_group_and_passes_other_groups_to_the_backend(checks):
    # a world call (async_op too) and one under torch.compile run the schedule; one on ranks {0, 1} goes to gloo
    got, ranks = checks
    assert [(r["async_exact"], r["compiled_exact"], r["restored"]) for r in got] == [(True, True, True)] * 4
    assert [r.get("other_group") for r in got] == [[0.0, 10.0], [1.0, 11.0], None, None]
    assert [r["calls"] for r in got] == [[2, 1]] * 2 + [[2, 0]] * 2
    assert ranks[0].stderr.count("a2a: ") == 1 and "a2a: " not in ranks[1].stderr


def _errors(what: str, file) -> list[tuple[int, str]]:
    ranks = torchrun(4, RANKS, "bad", what, str(file), timeout=90)
    return [(r.returncode, r.stderr.strip()) for r in ranks]


def test_a_late_rank_is_named_by_every_other_rank_within_the_timeout(four):
    got = _errors("late", four[0])
    assert got[:3] == [(2, f"torch_ranks: error: rank {r}: rank 3 did not arrive within 3 s (receive from rank 3, "
                           f"72 bytes)") for r in range(3)]
    assert got[3][0] == 0


def test_a_dead_rank_is_named_by_every_other_rank(four):
    got = _errors("dead", four[0])
    assert [rc for rc, _ in got] == [2, 2, 2, 9]
    for r, (_, err) in enumerate(got[:3]):
        assert re.fullmatch(rf"torch_ranks: error: rank {r}: lost rank 3 \(receive from it failed: (Connection closed "
                            rf"by peer|Read error) \[127.0.0.1\]:\d+(: Connection reset by peer)?\)", err), err


def test_an_unmodified_moe_layer_through_the_drop_in_gives_the_native_losses(tmp_path):
    # tools/torch_moe.py --compare: natively (dumping the router's choices), then through a demand-aware schedule
    # installed in one line, from the same model and data
    from a2a_compiler.demand import router_demand, zipf_demand

    path = a2a_compiler.compile("bipartite:4", "mpi", demand=zipf_demand(8, 1.0, seed=1)).write(tmp_path / "moe.xml")
    ranks = torchrun(8, str(REPO / "tools" / "torch_moe.py"), "--steps", "2", "--tokens", "64", "--schedule",
                     str(path), "--compare", "--dump-router", str(tmp_path / "routing.npy"), timeout=300)
    assert [r.returncode for r in ranks] == [0] * 8, ranks[0].stderr
    lines = [json.loads(x) for x in ranks[0].stdout.splitlines()]
    losses = {run: [x["loss"] for x in lines if x["run"] == run and "loss" in x] for run in ("native", "schedule")}
    assert len(losses["native"]) == 2 and losses["native"] == losses["schedule"]
    assert [x for x in lines if "schedule_calls" in x] == [{"run": "native", "schedule_calls": 0},
                                                           {"run": "schedule", "schedule_calls": 10}]  # 5 a step
    assert ranks[0].stderr.splitlines()[0] == ("a2a: dist.all_to_all_single and dist.all_to_all on this group now "
                                               "run schedule 'bipartite:4-mcf-extp' (mpi, route mode relay, 8 ranks); "
                                               "other groups and every other collective go to gloo untouched")
    ids = np.load(tmp_path / "routing.npy")                          # (ranks, tokens, top_k) expert ids
    assert ids.shape == (8, 64, 2)
    tokens = np.array([np.bincount(ids[s].reshape(-1) // 2, minlength=8) for s in range(8)])   # 2 experts a rank
    off = ~np.eye(8, dtype=bool)                                     # the diagonal stays local
    assert (router_demand(tmp_path / "routing.npy", experts=16).matrix[off] == tokens[off]).all()
