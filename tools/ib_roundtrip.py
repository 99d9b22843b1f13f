#!/usr/bin/env python3
"""Our forwarding tables against the real OpenSM on a simulated fabric (issue #23; runtimes/infiniband).

For every case (a topology and one of our engines): ibsim simulates the
topology (its net file from ``a2a_compiler.topology.ibnet.net_file``);
``ibnetdiscover`` discovers it; our engine routes the *discovered* fabric
(``ibnet:``) and writes OpenSM's LFT dump; ``opensm -R file -U DUMP`` installs
it; ``dump_fts`` (plus ``smpdump`` for the top LID) reads every switch's table
back.  Printed per case: the engine OpenSM's log names, whether the installed
rows equal ours exactly (switch-LID rows included), our all-to-all time and
shift congestion (worst / average, per cable) next to the same numbers traced
from the tables read back; then OpenSM's own engines on the same fabric
beside ours (host entries equal? switch-LID entries equal? both measured).
Last, a corrupted dump (a port the switch lacks): what OpenSM does with it
and what ``a2a`` says.

    python tools/ib_roundtrip.py                  # the acceptance cases of issue #23
    python tools/ib_roundtrip.py --quick          # fattree:4,3 only
    python tools/ib_roundtrip.py --json

Needs the Debian packages opensm, ibsim-utils and infiniband-diags (no root
needed: ibsim's socket is private to this run); every ibsim and opensm
process is stopped by its PID on every path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from a2a_compiler.errors import A2AError  # noqa: E402
from a2a_compiler.routes.opensm import read_dump, write_dump  # noqa: E402
from a2a_compiler.routes import route_tables  # noqa: E402
from a2a_compiler.topology import from_spec  # noqa: E402
from a2a_compiler.topology.ibnet import parse_ibnet  # noqa: E402
from runtimes.infiniband import SimulatedFabric, missing_tools, round_trip  # noqa: E402

#: Exit status of a run whose prerequisites are missing (automake's "skipped"; tests/test_tools.py skips it).
SKIP = 77
TREE_ENGINES = ("ftree", "minhop", "sssp", "dfsssp")
#: (spec, our engine, OpenSM engines to compare, why this case)
CASES = [
    ("fattree:4,3", "ftree", TREE_ENGINES, "Zahavi's 64-host 4-ary-3-tree"),
    ("fattree:4,3", "minhop", (), ""),
    ("fattree:4,3,merge=2", "ftree", TREE_ENGINES, "merged roots: 2-cable port groups (Table I row 16)"),
    ("fattree:4,3,merge=2", "minhop", (), ""),
    ("vartree:6,2,w=3", "ftree", ("ftree", "minhop"), "3 parallel cables per leaf-spine group (Table I row 1)"),
    ("fattree:4,2,merge=2", "minhop", ("ftree", "minhop"), "Table I row 5: roots merged in pairs"),
    ("fattree:8,3", "ftree", ("ftree", "minhop"), "512 hosts"),
    ("slimfly:5", "sf-min", ("minhop", "sssp", "ftree"), "Slim Fly with 200 hosts (ftree: OpenSM falls back)"),
    ("slimfly:5", "sf-layers", (), "4 layers as LID offsets (LMC 2)"),
    ("slimfly:5", "dfsssp", (), "SLs in the side file"),
    ("torus:4x4,p=2", "dor", ("dor",), "a 4x4 switch torus, 2 hosts per switch"),
]
QUICK = [CASES[0]]


LASH_SPECS = ("slimfly:3", "slimfly:5", "torus:4x4,p=2")


def lash(spec: str) -> dict:
    """OpenSM's lash engine (one path per switch pair, SLs per switch pair) against our layering schemes on
    its own tables: the lanes each needs."""
    import re

    from a2a_compiler.routes.report import relane

    with SimulatedFabric(from_spec(spec), "a2alash") as fabric:
        found = parse_ibnet(fabric.discover())
        run = fabric.opensm("lash")
        needed = re.findall(r"Lanes needed: (\d+)", run.log)
        theirs = read_dump(fabric.installed(), found, algo="opensm lash")
        m = theirs.measure()
        ours = {scheme: relane(theirs, scheme).n_lanes for scheme in ("lash", "lash-seq", "dfsssp")}
    return {"spec": spec, "opensm_engine": run.engine, "opensm_lanes": int(needed[-1]) if needed else None,
            "our_lanes_on_its_tables": ours, "alltoall_time": m.alltoall_time,
            "congestion_worst": m.shift.worst, "congestion_avg": m.shift.average}


def corrupted(spec: str = "fattree:4,3") -> dict:
    """A dump with a port the first switch lacks: OpenSM falls back to minhop; a2a refuses it in one line."""
    t = from_spec(spec)
    with SimulatedFabric(t, "a2acorrupt") as fabric:
        found = parse_ibnet(fabric.discover())
        text, _ = write_dump(route_tables(found, "ftree"))
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("0x"))
        lid, _, rest = lines[first].split(" ", 2)
        lines[first] = f"{lid} 042 {rest}"
        bad = fabric.dir / "corrupt.dump"
        bad.write_text("\n".join(lines) + "\n")
        run = fabric.opensm("file", bad)
        try:
            read_dump(bad.read_text(), found, source=str(bad.name))
            refused = None
        except A2AError as exc:
            refused = str(exc)
    return {"spec": spec, "opensm_engine": run.engine, "a2a": refused}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fattree:4,3 only (tests/test_tools.py runs it)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    args = ap.parse_args(argv)
    why = missing_tools()
    if why:
        print(f"ib_roundtrip: SKIP: {why}", file=sys.stderr)
        return SKIP
    load = os.getloadavg()
    out = {"load_average": list(load), "cases": []}
    for spec, algo, engines, note in (QUICK if args.quick else CASES):
        t0 = time.perf_counter()
        try:
            r = round_trip(from_spec(spec), algo, compare=engines, name="a2aibrt")
        except A2AError as exc:
            out["cases"].append({"spec": spec, "algo": algo, "error": str(exc)})
            if not args.json:
                print(f"{spec:22s} {algo:10s} error: {exc}", flush=True)
            continue
        row = {"spec": spec, "algo": algo, "note": note, "engine": r.engine, "installed_equal": r.installed_equal,
               "rows": r.rows, "differing_rows": r.differing_rows, "ours": r.ours, "read_back": r.read_back,
               "opensm": r.opensm, "seconds": time.perf_counter() - t0}
        out["cases"].append(row)
        if not args.json:
            print(f"{spec:22s} {algo:10s} opensm log: {r.engine} tables; installed == ours: {r.installed_equal} "
                  f"({r.rows} rows); ours {_fmt(r.ours)}; read back {_fmt(r.read_back)}", flush=True)
            for engine, c in r.opensm.items():
                if c.get("refused"):
                    print(f"{'':22s}   opensm -R {engine:7s} (log: {c['engine']}): a2a refuses ({c['refused']})"
                          + (f"; OpenSM's {c['engine']} tables equal ours: {c['equal']}" if "entries" in c else ""),
                          flush=True)
                    continue
                print(f"{'':22s}   opensm -R {engine:7s} (log: {c['engine']}): host entries equal {c['equal']} "
                      f"({c['differing_entries']}/{c['entries']} differ), switch LIDs equal {c['switch_rows_equal']}; "
                      f"theirs {_fmt(c['theirs'])}, ours {_fmt(c['ours'])}", flush=True)
    out["lash"] = [] if args.quick else [lash(spec) for spec in LASH_SPECS]
    out["corrupted"] = corrupted()
    out["load_average_after"] = list(os.getloadavg())
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    else:
        for x in out["lash"]:
            print(f"{x['spec']:22s} opensm -R lash (log: {x['opensm_engine']}): {x['opensm_lanes']} lanes; our layering "
                  f"of its tables: {x['our_lanes_on_its_tables']}; its tables {x['alltoall_time']:g} / "
                  f"{x['congestion_worst']:g} / {x['congestion_avg']:.4g}")
        c = out["corrupted"]
        print(f"corrupted dump ({c['spec']}, port 42 on the first switch): opensm's log names the {c['opensm_engine']} "
              f"engine; a2a: {c['a2a']}")
        print(f"load average {load[0]:.2f} before, {out['load_average_after'][0]:.2f} after")
    return 0


def _fmt(m: dict) -> str:
    return f"{m['alltoall_time']:g} / {m['congestion_worst']:g} / {m['congestion_avg']:.4g}"


if __name__ == "__main__":
    sys.exit(main())
