"""Service levels that fit InfiniBand: an SL is 4 bits and SL i rides data VL i (8 assumed, --vls N); the
layered engines fit their DFSSSP lanes, the others are refused in one line with nothing written."""

import json

import pytest

from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route_tables
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture


def sl_rows(path):
    return [line.split() for line in path.read_text().splitlines() if not line.startswith("#")]


def test_sixteen_fatpaths_layers_on_a_degraded_dragonfly_fit_eight_vls(tmp_path, capsys):
    """The reproduction of issue 34 item 1: 19 lanes before; now the routes DFSSSP put past VL 7 are dropped
    from their upper layers and every SL written is 0..7."""
    dump = tmp_path / "x.dump"
    assert main(["routes", "dragonfly:4,2,2", "--remove-links", "5", "--seed", "4", "--algo", "fatpaths",
                 "--layers", "16", "--lft", str(dump), "--json"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["layers"] == 8 and s["deadlock_free"] and s["routes"] == 69800
    info = s["info"]
    assert (info["vls"], info["vls_needed"], info["vls_limit"], info["routes_dropped"]) == (8, 19, 8, 11992)
    assert ("a2a routes: note: DFSSSP needed 19 virtual lanes; the 11,992 routes of layers 1.. on lanes past the "
            "fabric's 8 data VLs (--vls) were dropped (their pairs use their other layers)") in cap.err.splitlines()
    rows = sl_rows(tmp_path / "x.dump.sl")
    assert len(rows) == 69800 and {int(r[3]) for r in rows} == set(range(8))


def test_default_layers_fit_a_smaller_fabric():
    """The default 4 layers need 7 lanes on this degraded Dragonfly; a 4-VL fabric gets them fitted, layer 0
    (minimal) keeps every pair."""
    t = puncture(from_spec("dragonfly:4,2,2"), remove_links=5, seed=4)
    full = route_tables(t, "fatpaths")
    assert full.n_lanes == 7 and full.info["routes_dropped"] == 0
    fit = route_tables(t, "fatpaths", vls=4)
    assert fit.n_lanes == 4 and fit.info["vls_needed"] == 7 and fit.info["routes_dropped"] > 0
    assert fit.share[0].sum() == 72 * 71 and fit.measure().dependencies.find_cycle() is None


def test_layer_zero_that_cannot_fit_is_refused():
    with pytest.raises(A2AError, match=r"^sf-layers: layer 0's minimal routes alone need 2 virtual lanes \(DFSSSP\), "
                                       r"more than the fabric's 1 data VLs \(--vls\)$"):
        route_tables(from_spec("slimfly:5,p=0"), "sf-layers", vls=1)


def test_sls_past_the_fabric_are_refused_and_nothing_is_written(tmp_path, capsys):
    dump = tmp_path / "sf.dump"
    assert main(["routes", "slimfly:3", "--algo", "dfsssp", "--lft", str(dump), "--vls", "1", "-q"]) == 2
    assert capsys.readouterr().err == (
        "a2a routes: error: dfsssp: the routes need 2 virtual lanes (SLs 0..1), more than the fabric's 1 data VLs "
        "(--vls; an SL is 4 bits, 0..15; a port has at most 15 data VLs)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,err", [
    (["--algo", "sf-layers", "--vls", "16"], "--vls must be in 1..15 (InfiniBand's data virtual lanes), got 16"),
    (["--algo", "dfsssp", "--vls", "4"], "--vls applies to --algo fatpaths / sf-layers, or with --lft (its SL file)"),
    (["--algo", "mcf-extp", "--vls", "4"], "--vls does not apply to --algo mcf-extp (only to --algo sssp / dfsssp / "
                                           "dor / ftree / minhop / sf-min / fatpaths / sf-layers / file)"),
])
def test_bad_vls(args, err, capsys):
    assert main(["routes", "slimfly:3"] + args + ["-q"]) == 2
    assert capsys.readouterr().err == f"a2a routes: error: {err}\n"


def test_default_four_layers_needing_eleven_lanes_are_fitted(tmp_path, capsys):
    """Issue 34: the default 4 layers already need more than 8 lanes on a degraded Dragonfly (here 11, with 5
    switch-to-switch cables failed); the SL file holds SLs 0..7 only, every pair keeps layer 0."""
    dump = tmp_path / "d.dump"
    assert main(["routes", "dragonfly:6,3,3", "--remove-links", "5", "--among", "switch-links", "--seed", "0",
                 "--algo", "fatpaths", "--lft", str(dump), "--json", "-q", "--mcf", "off"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["hosts"], s["layers"], s["routes"]) == (342, 8, 421461)
    assert (s["info"]["vls_needed"], s["info"]["vls"], s["info"]["routes_dropped"]) == (11, 8, 45027)
    rows = sl_rows(tmp_path / "d.dump.sl")
    assert len(rows) == 421461 and {int(r[3]) for r in rows} == set(range(8))
    assert sum(r[2] == "0" for r in rows) == 342 * 341
