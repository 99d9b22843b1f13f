"""The precompiled schedules in schedules/ still verify and are exactly what the compiler produces today."""

import importlib.util
import json
from pathlib import Path

import pytest

from a2a_compiler.cli import main
from a2a_compiler.fabric import Fabric, parse_bandwidth

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "schedules"
spec = importlib.util.spec_from_file_location("make_schedules", ROOT / "tools" / "make_schedules.py")
make_schedules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_schedules)


@pytest.mark.parametrize("name, spec, options", [(n, s, o) for n, (s, _, o), _ in make_schedules.SCHEDULES])
def test_precompiled_schedule_verifies_on_its_recorded_topology_and_fabric(name, spec, options, capsys):
    f = SCHEDULES / name
    assert f.exists(), f"{name} missing: run python tools/make_schedules.py"
    assert main(["verify", str(f), "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] and d["errors"] == [] and d["format"] == name.split(".")[-2] and d["spec"] == spec
    assert d["ranks"] == (27 if "torus" in name else 8) and d["checks"]["topology"] == "pass"
    fabric = Fabric(*(parse_bandwidth(options[k]) if k in options else None for k in ("link_bw", "host_bw")),
                    options.get("forwarding", "host"))
    assert d["fabric"] == fabric.to_json_dict() and d["overrides"] == []
    if "min_fidelity" in options:  # the >= 0.99 torus file: LP 13.5, dataflow 13.63106 at C = 32: fidelity 0.9904
        assert d["predicted_time"] == pytest.approx(13.63105981338367, abs=1e-9)


def test_readme_lists_every_schedule_with_its_command():
    text = (SCHEDULES / "README.md").read_text()
    for name, (spec, emit, options), _ in make_schedules.SCHEDULES:
        assert f"`{make_schedules.command(name, spec, emit, options)}`" in text
        assert f"`{make_schedules.command(name, spec, emit, options)}` | " in text


def test_recompiled_schedules_are_byte_identical():
    assert make_schedules.main(["--check"]) == 0


def test_fidelity_needs_the_fabric_the_file_was_compiled_for(capsys):
    """The torus oneCCL file records LP 13.5 for its host-NIC bottleneck fabric: verify with no option
    prices it there (13.875, fidelity 0.973, what compile said); on a faster host link it prices at
    10.5, which no fidelity can describe (13.5 / 10.5 = 1.29): verify reports none and says why."""
    f = str(SCHEDULES / "torus-3x3x3-tsmcf.oneccl.xml")
    assert main(["verify", f, "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["predicted_time"], d["lp_time"], d["overrides"]) == (13.875, 13.5, [])
    assert d["fidelity"] == pytest.approx(13.5 / 13.875, rel=1e-12) and d["mcf_time"] == 13.499999945316388
    assert main(["verify", f, "--no-lp", "--host-bw", "1TB/s", "--json"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert (d["predicted_time"], d["lp_time"], d["fidelity"], d["mcf_time"]) == (10.5, 13.5, None, None)
    assert d["overrides"] == ["the fabric given (link 25 Gbit/s, host 8000 Gbit/s, host forwarding) differs from "
                              "the one the file was compiled for (link 25 Gbit/s, host 100 Gbit/s, host forwarding): "
                              "times are predicted on the one given"]
    assert out.err == f"a2a verify: warning: {f}: {d['overrides'][0]}\n"
