"""The precompiled schedules in schedules/ still verify and are exactly what the compiler produces today."""

import importlib.util
import json
from pathlib import Path

import pytest

from a2a_compiler.cli import main
from a2a_compiler.compiler import flag

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "schedules"
spec = importlib.util.spec_from_file_location("make_schedules", ROOT / "tools" / "make_schedules.py")
make_schedules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_schedules)


@pytest.mark.parametrize("name, spec, options", [(n, s, o) for n, (s, _, o), _ in make_schedules.SCHEDULES])
def test_precompiled_schedule_verifies(name, spec, options, capsys):
    f = SCHEDULES / name
    assert f.exists(), f"{name} missing: run python tools/make_schedules.py"
    fabric = [a for k in ("link_bw", "host_bw", "forwarding") if k in options for a in (flag(k), options[k])]
    assert main(["verify", str(f), "--topology", spec, *fabric, "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] and d["errors"] == [] and d["format"] == name.split(".")[-2]
    assert d["ranks"] == (27 if "torus" in name else 8)
    if "min_fidelity" in options:  # the >= 0.99 torus file: LP 13.5, dataflow 13.62068: fidelity 0.9911
        assert d["predicted_time"] == pytest.approx(13.620679582641579, abs=1e-9)


def test_readme_lists_every_schedule_with_its_command():
    text = (SCHEDULES / "README.md").read_text()
    for name, (spec, emit, options), _ in make_schedules.SCHEDULES:
        assert f"`{make_schedules.command(name, spec, emit, options)}`" in text
        assert f"`{make_schedules.command(name, spec, emit, options)}` | " in text


def test_recompiled_schedules_are_byte_identical():
    assert make_schedules.main(["--check"]) == 0


def test_fidelity_needs_the_fabric_the_file_was_compiled_for(capsys):
    """The torus oneCCL file records LP 13.5 (host-NIC bottleneck); on plain links it prices at 10.5,
    which no fidelity can describe: verify says so instead of reporting 13.5 / 10.5 = 1.29."""
    f = str(SCHEDULES / "torus-3x3x3-tsmcf.oneccl.xml")
    assert main(["verify", f, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["predicted_time"], d["file_lp_time"], d["fidelity"]) == (10.5, 13.5, None)
    assert d["warnings"] == ["the file's LP time 13.5 exceeds its predicted time 10.5 on this fabric, so it was "
                             "compiled for another one: give --link-bw, --host-bw and --forwarding as at compile "
                             "time for its fidelity"]
    assert main(["verify", f, "--link-bw", "25Gbps", "--host-bw", "100Gbps", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["predicted_time"], d["warnings"]) == (13.875, [])
    assert d["fidelity"] == pytest.approx(13.5 / 13.875, rel=1e-12)
