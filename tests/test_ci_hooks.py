"""CI-native verify: the pre-commit hook definition and what its entry does with staged files."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / ".pre-commit-hooks.yaml"


def test_pre_commit_hook_definition():
    yaml = pytest.importorskip("yaml", reason="pyyaml is a test dependency (pip install '.[test]')")
    (hook,) = yaml.safe_load(HOOKS.read_text())
    # the keys pre-commit's manifest schema requires, and ours
    assert {k: hook[k] for k in ("id", "name", "entry", "language")} == {
        "id": "a2a-verify", "name": "a2a verify (all-to-all schedules)", "entry": "a2a verify --skip-other",
        "language": "python"}
    files = re.compile(hook["files"])
    shipped = sorted(p.name for p in (ROOT / "schedules").glob("*.xml"))
    assert shipped and all(files.search(f"schedules/{n}") for n in shipped)
    # every name the README writes a schedule to, MSCCL++ plans (.json) among them
    readme = set(re.findall(r"a2a (?:compile|routes) [^\n]*?-o ([\w./-]+)", (ROOT / "README.md").read_text()))
    readme.discard("FILE")                                      # the usage line
    assert {"hc3.xml", "nv24.json", "moe.xml", "algos/hc3.xml"} <= readme
    assert all(files.search(n) for n in readme)
    assert not files.search("docs/msccl.md") and not files.search("README.md")


def test_hook_entry_skips_other_files_by_content_and_checks_plans(tmp_path):
    """Every staged .xml and .json reaches the entry: other well-formed files are skipped by their content,
    a corrupt MSCCL++ plan fails, a file that is not well-formed is an error."""
    import a2a_compiler

    plan = tmp_path / "t3.json"
    a2a_compiler.compile("hypercube:3", "mscclpp", max_chunks=1).write(plan)
    pom, ir, broken, bad = (tmp_path / n for n in ("pom.xml", "s.json", "broken.json", "bad.xml"))
    pom.write_text("<project><modelVersion>4.0.0</modelVersion></project>\n")
    ir.write_text('{"n_ranks": 8, "method": "tsmcf"}\n')
    broken.write_bytes(plan.read_bytes().replace(b'"input_chunks": 8', b'"input_chunks": 9', 1))
    bad.write_text("<algo name=")
    entry = [sys.executable, "-m", "a2a_compiler", "verify", "--skip-other", "--no-lp"]
    r = subprocess.run([*entry, str(pom), str(ir), str(plan)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == (f"a2a verify: {pom}: skipped, not a schedule (--skip-other)\n"
                                              f"a2a verify: {ir}: skipped, not a schedule (--skip-other)\n")
    assert r.stdout.count("\nVALID") == 1
    r = subprocess.run([*entry, str(pom), str(broken)], capture_output=True, text=True)
    assert r.returncode == 1 and "input_chunks=9" in r.stdout and r.stdout.endswith("INVALID\n")
    r = subprocess.run([*entry, str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(f"a2a verify: error: {bad}: ")


def test_hook_entry_fails_on_a_bad_staged_file(tmp_path):
    """pre-commit runs 'ENTRY FILE...' (pass_filenames): a valid schedule passes, a broken one fails."""
    good = ROOT / "schedules" / "bipartite-4-mcf-extp.mpi.xml"
    bad = tmp_path / "broken.mpi.xml"
    bad.write_bytes(good.read_bytes().replace(b'chunks="0 1 2 3"', b'chunks="0 1 2"', 1))
    entry = [sys.executable, "-m", "a2a_compiler", "verify", "--no-lp"]     # 'a2a verify' of this checkout
    assert subprocess.run([*entry, str(good)], capture_output=True).returncode == 0
    r = subprocess.run([*entry, str(good), str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr == ""
    assert f"{bad}: mpi, 8 ranks, 8 nodes, 4 chunk(s) per shard, 128 routes" in r.stdout
    assert "    error: rank 0 -> 4: chunk(s) 3 of the shard are never sent" in r.stdout


def test_every_command_documents_its_exit_status():
    from a2a_compiler.cli import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in COMMANDS:
        epilog = sub.choices[name].epilog
        section = epilog[epilog.index("exit status:\n"):]
        assert "\n  0    " in section and "\n  2    user error: " in section and "\n  130  interrupted" in section, name
    assert "\n  1    some FILE is an invalid schedule" in sub.choices["verify"].epilog
    assert "\n  124  the watchdog (--timeout) aborted" in sub.choices["run"].epilog
    assert "\n  125  a rank on the same machine died" in sub.choices["run"].epilog


def test_the_suites_time_and_budget_are_stated():
    """issue 34 item 12: README says how long the suite takes, within the budget it states."""
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"It takes a while: ([0-9.]+) minutes on the 2-core development machine.*?under \*\*([0-9]+) "
                     r"minutes\*\*", readme, re.S)
    assert said and float(said.group(1)) < int(said.group(2)) == 20
    command = "pip install '.[test]' && python -m pytest -q"
    assert f"```bash\n{command}\n```" in readme and f"  {command}\n" in (ROOT / ".ci" / "run").read_text()
