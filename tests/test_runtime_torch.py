"""The PyTorch runtime (runtimes.torch) on gloo CPU ranks: byte-exact against dist.all_to_all_single for every
format, the drop-in under an unmodified MoE layer, and bad input as one line on every rank."""

from __future__ import annotations

import json
import re

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


def test_a_permuted_rank_map_is_byte_exact(tmp_path):
    import socket

    (path,) = [f for f in _compile("hypercube:2", tmp_path) if f.endswith(".mpi.xml")]
    host = socket.gethostname()
    (tmp_path / "perm.map").write_text("".join(f"{host} {h}\n" for h in (2, 0, 3, 1)))
    (res,) = {json.dumps(r) for r in _exact(4, [f"{path}@{tmp_path / 'perm.map'}"], 120)}
    assert set(json.loads(res)[f"{path}@{tmp_path / 'perm.map'}"]["exact"].values()) == {True}


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """A 4-rank MPI path schedule (hypercube:2) and an 8-rank one."""
    d = tmp_path_factory.mktemp("bad")
    return (a2a_compiler.compile("hypercube:2", "mpi").write(d / "h2.mpi.xml"),
            a2a_compiler.compile("hypercube:3", "mpi").write(d / "h3.mpi.xml"))


def _errors(what: str, file, n: int = 4) -> list[tuple[int, str]]:
    ranks = torchrun(n, RANKS, "bad", what, str(file), timeout=90)
    return [(r.returncode, r.stderr.strip()) for r in ranks]


@pytest.mark.parametrize("what, line", [
    ("splits", "rank 0 sends rank 1 16 bytes but rank 1 expects 20"),
    ("noncontiguous", "rank 2: input is not contiguous; pass input.contiguous()"),
    ("dtype", "rank 3: input holds torch.float32 and output torch.float64; use one dtype"),
])
def test_bad_arguments_are_one_line_on_every_rank(four, what, line):
    assert _errors(what, four[0]) == [(2, f"torch_ranks: error: {line}")] * 4


def test_a_schedule_for_another_world_size_is_one_line_on_every_rank(four):
    line = ("torch_ranks: error: the schedule is for 8 ranks but the process group has 4; launch 8 ranks "
            "(torchrun --nproc-per-node)")
    assert _errors("size", four[1]) == [(2, line)] * 4


def test_a_wrong_rank_map_is_one_line_on_every_rank(four):
    import socket

    (four[0].parent / "h2.mpi.xml.map").write_text("".join(f"node-x {h}\n" for h in range(4)))
    line = (f"torch_ranks: error: {four[0]}.map: rank 0 runs on {socket.gethostname()!r}, which the rank map does "
            f"not list; the map expects a process on 'node-x' (line 1), where none runs")
    assert _errors("rank_map", four[0]) == [(2, line)] * 4


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
    # tools/torch_moe.py: native first (dumping the router's choices), then the demand-aware schedule compiled
    # from that dump installed in one line, the layer under torch.compile (the all-to-all is a graph break)
    from a2a_compiler.demand import router_demand

    moe = [str(REPO / "tools" / "torch_moe.py"), "--steps", "2", "--tokens", "64"]
    native = torchrun(8, *moe, "--dump-router", str(tmp_path / "routing.npy"), timeout=300)
    demand = router_demand(tmp_path / "routing.npy", experts=16)
    path = a2a_compiler.compile("bipartite:4", "mpi", demand=demand).write(tmp_path / "moe.mpi.xml")
    ours = torchrun(8, *moe, "--schedule", str(path), "--compile", timeout=300)
    assert [r.returncode for r in native + ours] == [0] * 16, ours[0].stderr
    losses = [[json.loads(x) for x in run[0].stdout.splitlines()] for run in (native, ours)]
    assert [x["loss"] for x in losses[0][:2]] == [x["loss"] for x in losses[1][:2]]
    assert (losses[0][2], losses[1][2]) == ({"schedule_calls": 0}, {"schedule_calls": 10})   # 5 calls a step
    assert ours[0].stderr.splitlines()[0] == ("a2a: dist.all_to_all_single and dist.all_to_all on this group now "
                                              "run schedule 'bipartite:4-mcf-extp' (mpi, route mode relay, 8 ranks); "
                                              "other groups and every other collective go to gloo untouched")


def test_the_drop_in_takes_its_group_and_passes_other_groups_to_the_backend(four):
    ranks = torchrun(4, RANKS, "dropin", str(four[0]), timeout=120)
    assert [r.returncode for r in ranks] == [0] * 4, ranks[0].stderr
    got = [json.loads(r.stdout) for r in ranks]
    assert [g["y"] for g in got] == [[100.0 * s + 2 * d + k for s in range(4) for k in range(2)] for d in range(4)]
    assert [g["z"] for g in got] == [[0.0, 10.0], [1.0, 11.0], None, None]
    assert [(g["counts"], g["restored"]) for g in got] == [([1, 1], True)] * 2 + [([1, 0], True)] * 2
    assert ranks[0].stderr.count("a2a: ") == 1 and ranks[1].stderr == ""
