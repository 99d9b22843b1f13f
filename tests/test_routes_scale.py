"""Routes at scale without per-route objects (issue 34 items 7-10): DFSSSP in one search, lanes on router
segments, table engines' --json / --lft past the per-route limit, cables pinned block by block, --mcf for every
engine with the reference's progress.  Times live in tools/bench_routes.py; these assert values."""

import json

import numpy as np
import pytest

from a2a_compiler.cli import main
from a2a_compiler.deadlock import assign_layers, channel_dependency_graph
from a2a_compiler.routes import route_tables, tables
from a2a_compiler.routes.tables import pin_cables
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture


def acyclic_per_layer(paths, layer):
    return all(channel_dependency_graph([p for p, x in zip(paths, layer) if x == k],
                                        [[k] * (len(p) - 1) for p, x in zip(paths, layer) if x == k]).find_cycle()
               is None for k in set(layer.tolist()))


def test_dfsssp_on_a_ring_breaks_the_weakest_dependency():
    """Four routes around a 4-ring (each two hops), one of them doubled: the cycle's weakest dependencies are
    induced by one route each; the first on the cycle is broken by moving its route up (1 of 5 routes)."""
    paths = [(0, 1, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1), (3, 0, 1)]
    layer = assign_layers(paths, "dfsssp")
    assert layer.tolist() == [1, 0, 0, 0, 0] and acyclic_per_layer(paths, layer)


def test_dfsssp_on_slimfly_routes_is_acyclic_per_layer():
    t = from_spec("slimfly:3,p=0")
    nodes, _ = route_tables(t, "sf-min").trace(*np.nonzero(~np.eye(t.n_hosts, dtype=bool)))
    paths = [tuple(r[r >= 0].tolist()) for r in nodes]
    layer = assign_layers(paths, "dfsssp")
    assert int(layer.max()) + 1 == 2 and acyclic_per_layer(paths, layer)


@pytest.mark.parametrize("topology,lanes,time", [
    (puncture(from_spec("fattree:4,3"), remove_links=6, seed=3, among="switch-links"), 1, 128),
    (from_spec("slimfly:3"), 2, 72),
])
def test_dfsssp_engine_lanes_come_from_switch_segments_and_are_deadlock_free(topology, lanes, time):
    ft = route_tables(topology, "dfsssp")
    m = ft.measure()
    assert ft.n_lanes == ft.info["vls"] == lanes and m.dependencies.find_cycle() is None
    assert m.alltoall_time == time


def test_layered_engine_reports_past_the_per_route_limit(monkeypatch, capsys):
    """sf-layers on slimfly:3 has 11,448 routes; with the per-route limit at 1,000, --json and --lft still work
    (issue 34 item 9: slimfly:7 was refused after 70 s), and -o is refused in one line."""
    monkeypatch.setattr(tables, "MAX_ROUTES", 1000)
    assert main(["routes", "slimfly:3", "--algo", "sf-layers", "--json", "-q", "--mcf", "off"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["routes"], s["layers"], s["info"]["paths_per_pair"]) == (11448, 4, 163 / 53)
    assert main(["routes", "slimfly:3", "--algo", "sf-layers", "-o", "x.xml", "-q"]) == 2
    assert ("sf-layers: slimfly:3 has 11,448 routes, more than the 1,000 per-route objects a2a builds"
            in capsys.readouterr().err)


def test_cables_pinned_block_by_block_are_the_same(monkeypatch):
    """Round-robin over port groups (merged roots: groups of 2 cables) counts each link's entries in order, so
    pinning in blocks of nodes gives the tables pinned at once."""
    t = from_spec("fattree:4,3,merge=2")
    nxt = route_tables(t, "minhop").next_node()
    whole = pin_cables(t, nxt)
    monkeypatch.setattr(tables, "BLOCK_HOPS", 100)
    assert np.array_equal(pin_cables(t, nxt), whole) and whole.dtype == np.int32


def test_mcf_off_and_auto_for_a_route_engine(capsys):
    """sf-val solved the link MCF always and refused --mcf off (352 s on slimfly:7): now off is taken and auto
    skips an LP over 400,000 columns with a note."""
    assert main(["routes", "slimfly:3", "--algo", "sf-val", "--mcf", "off"]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[1] == "time       177 link-times (max link load of the file); link MCF not solved"
    assert cap.err.splitlines() == ["a2a routes: note: link-MCF reference not solved (--mcf off): mcf_time and "
                                    "mcf_ratio are null"]
    assert main(["routes", "slimfly:3", "--algo", "sf-val", "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == ("time       177 link-times (max link load of the file); "
                                                       "link MCF 63; MCF ratio 0.3559")


def test_the_reference_says_what_it_solves():
    from a2a_compiler.fabric import Fabric
    from a2a_compiler.routes.report import mcf_reference, mcf_skipped

    assert mcf_skipped(from_spec("fattree:8,3")) == (
        "link-MCF reference skipped: its LP would have 1,572,864 columns (512 hosts x 3072 links), over --mcf auto's "
        "400,000; mcf_time and mcf_ratio are null (--mcf on solves it)")
    lines = []
    assert mcf_reference(from_spec("fattree:4,2"), Fabric(), "on", lines.append)[0] == pytest.approx(15, rel=1e-6)
    assert lines[0] == "link-MCF reference: an LP of 1,024 columns (16 hosts x 64 links; --mcf off skips it)"


@pytest.mark.parametrize("spec,algo,err", [
    ("fattree:22,3", "dfsssp", "fattree:22,3: DFSSSP's per-pair arrays would need 5.1 GiB (113369256 x 6), over the "
                               "4 GiB limit"),
    ("slimfly:11", "sf-layers", "slimfly:11: the 16 layers' per-pair arrays would need 5.7 GiB (75898944 x 10), "
                                "over the 4 GiB limit"),
    ("slimfly:11", "fatpaths", "slimfly:11: the 16 layers' per-pair arrays would need 5.7 GiB (75898944 x 10), "
                               "over the 4 GiB limit"),
])
def test_per_pair_arrays_past_the_limit_are_refused_up_front(spec, algo, err, capsys):
    """Estimated before anything is routed (issue 34 item 7: 9.4-9.6 GB with no estimate)."""
    extra = ["--layers", "16"] if algo != "dfsssp" else []
    assert main(["routes", spec, "--algo", algo, *extra, "-q"]) == 2
    assert capsys.readouterr().err.startswith(f"a2a routes: error: {err}")
