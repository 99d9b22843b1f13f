"""The forwarding tables a fabric's switches hold: ``dump_fts``, completed with ``smpdump`` for the top LID.

infiniband-diags 44's ``dump_fts`` (and ``dump_lfts``, its old name) reads a
switch's linear forwarding table in 64-entry blocks (the LinearForwardingTable
attribute, 0x19) up to LinearFDBTop, but skips the last block when it holds
only the top LID (a top that is a multiple of 64: ibsim's ``fattree:8,3`` has
704 LIDs, top 0x2c0), so that LID has no row at any switch, although the
switches forward it.  :func:`installed_tables` reads that block with
``smpdump -D PATH 0x19 BLOCK`` on every switch the dump lists (the directed
route its header gives) and adds the row in ``dump_fts``'s form, the owner's
port GUID from ``smpquery nodeinfo TOP``.  Run on a host of the fabric::

    python -m runtimes.infiniband.installed > installed.txt
    a2a routes ibnet:fabric.txt --algo file --lft-in installed.txt
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Callable

#: A dump_fts switch header: the top LID and the directed-route path.
DR_HEAD = re.compile(r"Unicast lids \[0x[0-9a-fA-F]+-0x([0-9a-fA-F]+)\] of switch DR path slid \d+; dlid \d+; "
                     r"([0-9,]+) guid")
#: ``smpquery nodeinfo``'s port GUID line.
_PORT_GUID = re.compile(r"(?m)^PortGuid:\.*(0x[0-9a-fA-F]+)")


def installed_tables(run: Callable[[list[str]], str], owner: Callable[[int], int | None] | None = None) -> str:
    """``dump_fts``'s output with each switch's row for its top LID added where the tool left it out (module
    docstring).  ``run(cmd)`` runs a diagnostic and returns its stdout; ``owner(lid)`` gives the port GUID
    holding a LID (``None``: unassigned; default: ``smpquery nodeinfo LID``)."""
    if owner is None:
        def owner(lid: int) -> int | None:
            m = _PORT_GUID.search(run(["smpquery", "nodeinfo", str(lid)]))
            return int(m.group(1), 16) if m else None
    text = run(["dump_fts"])
    guid: dict[int, int | None] = {}
    out = []
    for section in re.split(r"(?m)^(?=Unicast lids)", text):
        m = DR_HEAD.match(section)
        if m:
            top = int(m.group(1), 16)
            if not re.search(rf"(?m)^0x{top:04x} ", section):
                if top not in guid:
                    guid[top] = owner(top)
                if guid[top] is not None:
                    words = "".join(run(["smpdump", "-D", m.group(2), "0x19", str(top // 64)]).split()[:32])
                    port = int(words[2 * (top % 64): 2 * (top % 64) + 2], 16)
                    if port != 0xFF:
                        head, _, rest = section.partition("\n")
                        section = f"{head}\n0x{top:04x} {port:03d} : (portguid 0x{guid[top]:016x})\n{rest}"
        out.append(section)
    return "".join(out)


#: Seconds one diagnostic may run.
TOOL_TIMEOUT = 600


def _run(cmd: list[str]) -> str:
    """A diagnostic's stdout; a missing tool, a failure or a timeout ends the program with one line."""
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TOOL_TIMEOUT)
    except FileNotFoundError:
        raise SystemExit(f"installed: {cmd[0]} not found (Debian: apt-get install infiniband-diags)") from None
    except subprocess.TimeoutExpired:
        raise SystemExit(f"installed: {cmd[0]} ran past {TOOL_TIMEOUT} s") from None
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise SystemExit(f"installed: {cmd[0]} failed: {last}")
    return proc.stdout


def main() -> int:
    """``python -m runtimes.infiniband.installed``: the installed tables on stdout."""
    if len(sys.argv) > 1:
        print("usage: python -m runtimes.infiniband.installed > installed.txt  (dump_fts + smpdump on this "
              "host's fabric)", file=sys.stderr)
        return 2
    sys.stdout.write(installed_tables(_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
