"""The solver result object (like ``scipy.optimize.OptimizeResult``, but immutable).

Normalisation used by every method: flows are **per unit demand** — each
commodity ``(s, d)`` delivers exactly one shard, so ``link_flows[k, e]`` is the
fraction of shard ``k = s*N + d`` that crosses link ``e`` of the *base* topology
(host–NIC augmentation already projected away), and path weights of one
commodity sum to 1.  The all-to-all time of the static flow is ``1/F`` link-times.

With a demand matrix (:mod:`a2a_compiler.demand`) flows stay per unit: each
commodity's flows are fractions of its own volume ``D[s, d]``; ``F`` is the largest
scale with ``F·D[s, d]`` shipped for every pair at once, and ``1/F`` the time of the
all-to-allv in link-times (volumes have mean 1, so it compares with the uniform time).

Time-stepped solutions (tsMCF) have ``n_steps > 1``: column ``t*n_links + e`` is
the fraction crossing link ``e`` in step ``t`` and ``step_loads[t] = U_t``.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import FormatError
from ..fabric import Fabric
from ..files import atomic_write

FILE_FORMAT = "a2a-solution"
FILE_VERSION = 2  # 2: fabric keys link_bw_Bps, host_bw_Bps (version 1's link_bw, host_bw still load)


@dataclass(frozen=True)
class WeightedPath:
    """One route of commodity ``src -> dst``: node sequence and shard fraction."""

    src: int
    dst: int
    nodes: tuple[int, ...]
    weight: float


@dataclass(frozen=True, eq=False)
class FlowSolution:
    """Concurrent flow ``F``, its certificate, timings and the flows themselves.

    ``upper_bound`` is a certified upper bound on the optimal ``F`` (weak duality
    on dual link lengths, or the LP's own optimum for tsMCF); ``gap`` is relative.
    """

    method: str
    spec: str
    fabric: Fabric
    n_hosts: int
    n_links: int
    concurrent_flow: float
    upper_bound: float
    status: str = "optimal"
    timings: dict = field(default_factory=dict)
    n_steps: int = 1
    step_loads: np.ndarray | None = None
    link_flows: sp.csr_array | None = None
    paths: tuple[WeightedPath, ...] = ()
    info: dict = field(default_factory=dict)
    demand: object = None   # the Demand solved for (None: uniform)

    @property
    def gap(self) -> float:
        """Relative optimality gap ``(bound - F) / bound`` (0 when certified optimal)."""
        if self.upper_bound <= 0 or not math.isfinite(self.upper_bound):
            return math.inf
        return max(0.0, (self.upper_bound - self.concurrent_flow) / self.upper_bound)

    @property
    def a2a_time(self) -> float:
        """All-to-all time for unit shards in link-times: ``1/F``."""
        return math.inf if self.concurrent_flow <= 0 else 1.0 / self.concurrent_flow

    @property
    def lp_time(self) -> float:
        """Certified lower bound on the all-to-all time of the method's own LP, in link-times.

        ``1 /`` a certified upper bound on the LP's ``F``: ``upper_bound`` (the MCF
        dual bound; tsMCF's time-expanded dual bound), or for pMCF the bound over
        its candidate paths (``info["path_lp_upper_bound"]``) when tighter.  Any
        schedule made from this solution (chunked flows are a feasible point of the
        same LP) takes at least this long, so ``lp_time / predicted_time <= 1`` by
        construction (:func:`a2a_compiler.chunk.cost.ratio`).
        """
        bound = max(self.concurrent_flow, min(self.upper_bound, self.info.get("path_lp_upper_bound", math.inf)))
        return math.inf if bound <= 0 else 1.0 / bound

    @property
    def solve_seconds(self) -> float:
        """Total solve time (the sum of :attr:`timings`)."""
        return float(sum(self.timings.values()))

    def throughput_bound(self) -> float | None:
        """(N-1)·F·b in bytes/s when the link bandwidth is known (Basu et al. §5.2): what each rank sends
        per second on average (with a demand too: its volumes have mean 1)."""
        if self.fabric.link_bw is None:
            return None
        return (self.n_hosts - 1) * self.concurrent_flow * self.fabric.link_bw

    def summary(self) -> dict:
        """The JSON summary printed by ``a2a solve --json`` (docs/json.md)."""
        tb = self.throughput_bound()
        return {
            "method": self.method,
            "spec": self.spec,
            "hosts": self.n_hosts,
            "fabric": self.fabric.to_json_dict(),
            "status": self.status,
            "concurrent_flow": self.concurrent_flow,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "flow_time": self.a2a_time,
            "lp_time": self.lp_time,
            "solve_seconds": self.solve_seconds,
            "timings": dict(self.timings),
            "lp_steps": self.n_steps,
            "paths": len(self.paths),
            "throughput_bound_GBps": None if tb is None else tb / 1e9,
            **({"demand": self.demand.to_json_dict()} if self.demand is not None else {}),
            **self.info,
        }

    # --------------------------------------------------------------- files
    def save(self, path) -> Path:
        """Write a lossless ``.npz`` (zip of arrays + a JSON header) atomically.

        The same solution gives byte-identical files: no timings inside (they
        differ run to run; :meth:`load` returns empty ``timings``) and fixed zip
        member timestamps.
        """
        meta = {
            "format": FILE_FORMAT, "version": FILE_VERSION, "method": self.method, "spec": self.spec,
            "fabric": self.fabric.to_json_dict(), "n_hosts": self.n_hosts, "n_links": self.n_links,
            "concurrent_flow": self.concurrent_flow, "upper_bound": self.upper_bound,
            "status": self.status, "n_steps": self.n_steps, "info": self.info,
        }
        if self.demand is not None:
            meta["demand"] = self.demand.to_json_dict(max_ranks=0)
        arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
        if self.demand is not None:
            arrays["demand_volumes"] = np.asarray(self.demand.volumes, dtype=float)
        if self.step_loads is not None:
            arrays["step_loads"] = np.asarray(self.step_loads, dtype=float)
        if self.link_flows is not None:
            coo = sp.coo_array(self.link_flows)
            arrays.update(flow_row=coo.row.astype(np.int64), flow_col=coo.col.astype(np.int64),
                          flow_val=coo.data.astype(float), flow_shape=np.array(coo.shape, dtype=np.int64))
        if self.paths:
            arrays["path_src"] = np.array([p.src for p in self.paths], dtype=np.int64)
            arrays["path_dst"] = np.array([p.dst for p in self.paths], dtype=np.int64)
            arrays["path_weight"] = np.array([p.weight for p in self.paths], dtype=float)
            arrays["path_len"] = np.array([len(p.nodes) for p in self.paths], dtype=np.int64)
            arrays["path_nodes"] = np.array([v for p in self.paths for v in p.nodes], dtype=np.int64)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:  # np.savez_compressed stamps the clock
            for name, arr in arrays.items():
                member = io.BytesIO()
                np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, member.getvalue())
        return atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path) -> "FlowSolution":
        """Read a file written by :meth:`save`; anything else raises :class:`FormatError`."""
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise FormatError(f"{path}: not a readable solution file: {exc}") from None
        try:
            meta = json.loads(arrays["meta"].tobytes())
            if meta.get("format") != FILE_FORMAT:
                raise KeyError("format")
        except (KeyError, ValueError):
            raise FormatError(f"{path}: not an {FILE_FORMAT} file") from None
        flows = None
        if "flow_val" in arrays:
            flows = sp.csr_array((arrays["flow_val"], (arrays["flow_row"], arrays["flow_col"])),
                                 shape=tuple(arrays["flow_shape"]))
        paths: tuple[WeightedPath, ...] = ()
        if "path_src" in arrays:
            bounds = np.concatenate([[0], np.cumsum(arrays["path_len"])])
            nodes = arrays["path_nodes"]
            paths = tuple(
                WeightedPath(int(s), int(d), tuple(int(v) for v in nodes[bounds[i]:bounds[i + 1]]), float(w))
                for i, (s, d, w) in enumerate(zip(arrays["path_src"], arrays["path_dst"], arrays["path_weight"]))
            )
        demand = None
        if "demand_volumes" in arrays:
            from ..demand import Demand

            demand = Demand.from_volumes(arrays["demand_volumes"], str(meta.get("demand", {}).get("source", path)))
        return cls(
            method=meta["method"], spec=meta["spec"], fabric=Fabric.from_json_dict(meta["fabric"]),
            n_hosts=meta["n_hosts"], n_links=meta["n_links"], concurrent_flow=meta["concurrent_flow"],
            upper_bound=meta["upper_bound"], status=meta["status"], timings=meta.get("timings", {}),
            n_steps=meta["n_steps"], step_loads=arrays.get("step_loads"), link_flows=flows, paths=paths,
            info=meta.get("info", {}), demand=demand,
        )
