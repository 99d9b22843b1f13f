"""Find and remove testbed instances; guarantee teardown on success, error, signals and killed ranks.

An instance is the set of namespaces named ``a2tb-NAME-*`` plus its state
directory ``/run/a2a-testbed/NAME``.  Removing it kills the processes still
inside its namespaces (ranks, proxies, ``mpiexec``: all started by the
testbed), then unmounts the namespaces; the kernel destroys their
interfaces, addresses, routes and qdiscs with them.  Nothing outside the
``a2tb-`` prefix is ever touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

from pyroute2 import netns

from a2a_compiler.errors import A2AError

from .layout import PREFIX, check_name

STATE_ROOT = Path("/run/a2a-testbed")
_NS_RE = re.compile(re.escape(PREFIX) + r"([a-z0-9]{1,16})-(?:m|h\d+|n\d+)")


def require_root() -> None:
    """One clear line when the testbed cannot work here."""
    if os.geteuid() != 0:
        raise A2AError("the testbed needs root (network namespaces, veth links and qdiscs need CAP_NET_ADMIN "
                       "and CAP_SYS_ADMIN); run it as root")
    if not os.path.exists("/proc/self/ns/net"):
        raise A2AError("this kernel has no network namespaces (CONFIG_NET_NS)")


def instances() -> dict[str, list[str]]:
    """Every testbed instance on this machine: name -> its namespaces."""
    found: dict[str, list[str]] = {}
    for name in sorted(netns.listnetns()):
        m = _NS_RE.fullmatch(name)
        if m:
            found.setdefault(m.group(1), []).append(name)
    if STATE_ROOT.is_dir():
        for d in STATE_ROOT.iterdir():
            if _NS_RE.fullmatch(f"{PREFIX}{d.name}-m"):
                found.setdefault(d.name, [])
    return dict(sorted(found.items()))


def state_dir(name: str) -> Path:
    return STATE_ROOT / check_name(name)


def read_state(name: str) -> dict | None:
    try:
        return json.loads((state_dir(name) / "state.json").read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_alive(state: dict | None) -> bool:
    return bool(state) and bool(state.get("owner_pid")) and _alive(int(state["owner_pid"]))


def remove(name: str) -> int:
    """Tear down instance ``name``; returns how many namespaces were removed (0 if none existed)."""
    check_name(name)
    mine = instances().get(name, [])
    pids = [pid for ns, ps in netns.ns_pids().items() if ns in mine for pid in ps if pid != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.02)
    for ns in mine:
        with contextlib.suppress(FileNotFoundError):
            netns.remove(ns)
    shutil.rmtree(state_dir(name), ignore_errors=True)
    return len(mine)


def remove_all() -> dict[str, int]:
    """Tear down every instance carrying the testbed prefix (and nothing else)."""
    return {name: remove(name) for name in instances()}
