"""The precompiled schedules in schedules/ still verify and are exactly what the compiler produces today."""

import importlib.util
import json
from pathlib import Path

import pytest

from a2a_compiler.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCHEDULES = ROOT / "schedules"
spec = importlib.util.spec_from_file_location("make_schedules", ROOT / "tools" / "make_schedules.py")
make_schedules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_schedules)


def _verify_args(cargs):
    """``a2a compile`` arguments -> ``a2a verify`` topology/fabric arguments."""
    i = cargs.index("--emit")
    rest = cargs[1:i] + cargs[i + 2:]
    return ["--topology", cargs[0], *rest]


@pytest.mark.parametrize("name, cargs", [(n, a) for n, a, _ in make_schedules.SCHEDULES])
def test_precompiled_schedule_verifies(name, cargs, capsys):
    f = SCHEDULES / name
    assert f.exists(), f"{name} missing: run python tools/make_schedules.py"
    assert main(["verify", str(f), *_verify_args(cargs), "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] and d["errors"] == [] and d["format"] == name.split(".")[-2]
    assert d["ranks"] == (27 if "torus" in name else 8)


def test_readme_lists_every_schedule_with_its_command():
    text = (SCHEDULES / "README.md").read_text()
    for name, cargs, _ in make_schedules.SCHEDULES:
        assert f"`a2a compile {' '.join(cargs)} -o schedules/{name}`" in text


def test_recompiled_schedules_are_byte_identical():
    assert make_schedules.main(["--check"]) == 0
