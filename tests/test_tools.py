"""Every script in tools/ runs, in its quick mode, so a rename in the package cannot break one silently
(issue 34, item 21: bench_runtime.py failed with KeyError: 'bytes' after the runtime's JSON rename).

Each script takes ``--quick`` (a tiny run of seconds, its argparse help says what it does) and exits 0; one
whose prerequisites are missing here (mpiexec, OpenSM and ibsim) says ``SKIP: why`` and exits 77, which skips
the case -- except under CI, which provides them (.ci/run).  A script of an optional extra (torch) runs where the
extra is installed (CI: its own environment, ``-m torch``).  The runs cost about a minute of CPU in all.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torchjobs import needs_torch

REPO = Path(__file__).resolve().parents[1]
#: Scripts of the torch extra: they run in the torch environment (tests/torchjobs.py's needs_torch).
TORCH_SCRIPTS = {"torch_moe.py"}
SCRIPTS = [pytest.param(p, id=p.name, marks=needs_torch if p.name in TORCH_SCRIPTS else ())
           for p in sorted((REPO / "tools").glob("*.py")) if not p.name.startswith("_")]
#: The exit status of a quick run whose prerequisites are missing (automake's "skipped").
SKIP = 77


def _quick_help(path: Path) -> str | None:
    """The help text of the script's ``--quick`` option, or None when it has none."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and any(
                isinstance(a, ast.Constant) and a.value == "--quick" for a in node.args):
            return next((ast.unparse(k.value) for k in node.keywords if k.arg == "help"), "")
    return None


@pytest.mark.parametrize("path", [p.values[0] for p in SCRIPTS], ids=[p.id for p in SCRIPTS])
def test_every_tool_has_a_documented_quick_mode(path):
    assert _quick_help(path), f"{path.name}: add a --quick option with a help text (a run of seconds)"


@pytest.mark.parametrize("path", SCRIPTS)
def test_every_tool_runs_quick(path, tmp_path):
    p = subprocess.run([sys.executable, str(path), "--quick"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    if p.returncode == SKIP and not os.environ.get("CI"):
        pytest.skip(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []          # a quick run leaves nothing behind


@pytest.mark.parametrize("script, given, flags", [
    ("bench_resolve.py", ["--batches", "5"], "--batches"),
    ("bench_runtime.py", ["-n", "16", "--iters", "3"], "--nranks, --iters"),
    ("bench_solve.py", ["--sizes", "32"], "--sizes"),
    ("bench_tsmcf.py", ["--sizes", "32"], "--sizes"),
    ("torch_moe.py", ["--steps", "3"], "--steps"),
])
def test_quick_refuses_the_options_it_sets(script, given, flags):
    """issue 34's third newcomer pass: --quick silently replaced options given beside it (tools/_quick.py)."""
    p = subprocess.run([sys.executable, str(REPO / "tools" / script), "--quick", *given], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    them = "them" if "," in flags else "it"
    assert (p.returncode, p.stdout, p.stderr.splitlines()[-1]) == (
        2, "", f"{script}: error: {flags}: --quick sets {them} itself")
