"""`a2a topo`: summary, --json values, --save, puncturing options and error handling (in-process)."""

import json

import pytest

from a2a_compiler.cli import main
from a2a_compiler.topology import Topology, from_spec


def run(capsys, *argv):
    rc = main(["topo", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_torus(capsys):
    rc, out, err = run(capsys, "torus:3x3x3", "--json")
    assert rc == 0 and err == ""
    d = json.loads(out)
    assert d["spec"] == "torus:3x3x3"
    assert (d["hosts"], d["switches"], d["links"], d["degree_min"], d["degree_max"], d["diameter"]) == (27, 0, 162, 6, 6, 3)
    assert d["mean_distance"] == pytest.approx(54 / 26)
    assert d["distance_bound_F"] == pytest.approx(162 / (27 * 54)) and d["distance_bound_F"] == pytest.approx(1 / 9)
    assert d["thm1_time"] == pytest.approx(46 / 6)
    assert d["directed"] is False


def test_json_router_topology(capsys):
    rc, out, _ = run(capsys, "fattree:4,3", "--json")
    d = json.loads(out)
    assert rc == 0 and (d["hosts"], d["switches"], d["links"]) == (64, 48, 384)
    assert (d["degree_min"], d["degree_max"], d["diameter"]) == (1, 1, 6)
    assert d["thm1_time"] is None


def test_json_slimfly_19(capsys):
    rc, out, _ = run(capsys, "slimfly:19,p=0", "--json")
    d = json.loads(out)
    assert rc == 0 and (d["hosts"], d["links"], d["degree_max"], d["diameter"]) == (722, 2 * 10469, 29, 2)
    assert round(d["mean_distance"], 4) == 1.9598
    assert any("collapsed: routers are the hosts" in n for n in d["notes"])


def test_human_summary(capsys):
    rc, out, _ = run(capsys, "slimfly:5,p=0")
    assert rc == 0
    assert "50 hosts, 0 switches" in out and "350 links (175 cables)" in out
    assert "diameter 2, mean 1.8571" in out
    assert "note       collapsed: routers are the hosts (p=0)" in out
    rc, out, _ = run(capsys, "slimfly:5")
    assert "200 hosts, 50 switches" in out and "750 links (375 cables)" in out
    assert "note       4 host(s) per router" in out
    rc, out, _ = run(capsys, "genkautz:64,4")
    assert "arcs (directed)" in out and "thm 1" in out


def test_puncture_options(capsys):
    rc, out, _ = run(capsys, "torus:3x3x3", "--remove-links", "3", "--seed", "1", "--json")
    d = json.loads(out)
    assert rc == 0 and d["spec"] == "torus:3x3x3 -links 3 seed=1" and d["links"] == 156
    rc, out, _ = run(capsys, "torus:3x3x3", "--remove-nodes", "2", "--json")
    assert json.loads(out)["hosts"] == 25


def test_save_round_trip(capsys, tmp_path):
    path = tmp_path / "t.json"
    rc, out, _ = run(capsys, "dragonfly:4,2,2", "--save", str(path))
    assert rc == 0 and f"saved      {path}" in out
    saved = Topology.load(path)
    assert saved.to_json_dict() == from_spec("dragonfly:4,2,2").to_json_dict()
    rc, out, _ = run(capsys, f"file:{path}", "--json")
    assert json.loads(out)["spec"] == "dragonfly:4,2,2" and json.loads(out)["hosts"] == 72


@pytest.mark.parametrize("argv,message", [
    (["slimfly:6"], "a2a topo: error: slimfly:6: parameter q must be a prime power"),
    (["torus:0x3"], "a2a topo: error: torus:0x3: parameter k1 must be >= 1"),
    (["genkautz:5,0"], "a2a topo: error: genkautz:5,0: parameter d must be >= 1"),
    (["nosuch:3"], "unknown topology family 'nosuch' in 'nosuch:3'; known families: complete:N"),
    (["ring:8", "--remove-links", "2"], "ring:8 is disconnected after removing 2 random cables (seed 0)"),
])
def test_errors_exit_2_and_write_nothing(capsys, tmp_path, argv, message):
    path = tmp_path / "out.json"
    rc, out, err = run(capsys, *argv, "--save", str(path))
    assert rc == 2 and out == "" and message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_failing_save_leaves_no_file(capsys, tmp_path):
    path = tmp_path / "missing-dir" / "t.json"
    rc, out, err = run(capsys, "ring:5", "--save", str(path))
    assert rc == 2 and "cannot write" in err and "does not exist" in err
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_malformed_file_names_line(capsys, tmp_path):
    path = tmp_path / "net.txt"
    path.write_text("a b\nb c 1 extra\n")
    rc, _, err = run(capsys, f"file:{path}")
    assert rc == 2 and f"{path}: line 2: expected 'u v [capacity]', got 4 fields" in err


def test_help_explains_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["topo", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    for option in ["--remove-links", "--remove-nodes", "--seed", "--json", "--save", "distance_bound_F"]:
        assert option in out
