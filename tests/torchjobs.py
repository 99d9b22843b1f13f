"""torch.distributed jobs for the PyTorch runtime's tests: ``n`` ranks started as torchrun starts them.

Each rank is a process with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (gloo's TCP
store on a free local port), under one hard timeout for the whole job, so a hang fails the test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The torch tests need torch (the torch extra); .ci/run runs them in an environment of their own (-m torch).
needs_torch = [pytest.mark.torch,
               pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None,
                                  reason="needs torch: pip install '.[torch]' (CI: its own environment, -m torch)")]


@dataclass
class Rank:
    returncode: int
    stdout: str
    stderr: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(n: int, *args: str, timeout: float = 120) -> list[Rank]:
    """Run ``python ARGS`` as ``n`` gloo ranks from the repository root; every rank's exit code and output."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(n),
           "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, *args], cwd=REPO, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    deadline = time.monotonic() + timeout
    out = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            out.append(Rank(p.returncode, so, se))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the {n}-rank torch job {' '.join(args)} did not end within {timeout} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return out
