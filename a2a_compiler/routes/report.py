"""What ``a2a routes`` reports for a destination-based engine, computed from its forwarding tables.

:func:`table_report` is the library entry point: the engine's tables
(:func:`~a2a_compiler.routes.route_tables`), optionally re-laned by a deadlock
scheme, measured per cable (all-to-all time, shift congestion), checked for
deadlock on their virtual lanes, priced against the link MCF where that LP
fits (``mcf="auto"``), and, on request, written as an MPI path schedule (the
per-pair routes traced from the tables, where the size allows) and as
OpenSM's LFT dump with its SL file.  Nothing scales with per-route Python
objects unless a file of routes is asked for.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ..chunk.cost import ratio
from ..deadlock import assign_layers
from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from . import LAYERED_ENGINES, route_tables
from .layered import segment_lanes
from .opensm import DEFAULT_VLS, check_sls, opensm_options, sl_file, write_dump
from .routers import router_view
from .schedule import RoutedSchedule, route_schedule
from .tables import ForwardingTables, Measurement

#: ``mcf="auto"`` solves the link-MCF reference when its LP has at most this many columns (hosts x links);
#: fattree:8,3 (1.6 M) ran past 300 s here, slimfly:5 (150 k) takes 12 s.
MCF_AUTO_COLUMNS = 400_000


def mcf_skipped(topology: Topology, mode: str = "auto") -> str | None:
    """Why the link-MCF reference is not solved in ``mode`` (one line), or ``None``: ``off``, or ``auto`` with an
    LP over :data:`MCF_AUTO_COLUMNS` columns."""
    if mode not in ("auto", "on", "off"):
        raise A2AError(f"--mcf must be auto, on or off, not {mode!r}")
    columns = topology.n_hosts * topology.n_links
    if mode == "off":
        return "link-MCF reference not solved (--mcf off): mcf_time and mcf_ratio are null"
    if mode == "auto" and columns > MCF_AUTO_COLUMNS:
        return (f"link-MCF reference skipped: its LP would have {columns:,} columns ({topology.n_hosts} hosts "
                f"x {topology.n_links} links), over --mcf auto's {MCF_AUTO_COLUMNS:,}; mcf_time and mcf_ratio are "
                "null (--mcf on solves it)")
    return None


def mcf_reference(topology: Topology, fabric: Fabric, mode: str = "auto", progress=None) \
        -> tuple[float | None, str | None]:
    """``(mcf_time, note)``: the optimal link-MCF time, or ``None`` and the one line saying why it was skipped;
    the solve reports its progress (``progress``)."""
    note = mcf_skipped(topology, mode)
    if note:
        return None, note
    from ..solve import solve

    if progress:
        progress(f"link-MCF reference: an LP of {topology.n_hosts * topology.n_links:,} columns ({topology.n_hosts} "
                 f"hosts x {topology.n_links} links; --mcf off skips it)")
    return solve(topology, fabric, "mcf-decomp", progress=progress).lp_time, None


@dataclass(frozen=True, eq=False)
class TableReport:
    """The tables and everything ``a2a routes`` says about them (``summary()`` is its ``--json``)."""

    tables: ForwardingTables
    measurement: Measurement
    deadlock_cycle: str | None
    lanes: int
    deadlock: str | None
    mcf_time: float | None
    notes: tuple[str, ...]
    schedule: RoutedSchedule | None
    lft: dict | None
    timings: dict = field(default_factory=dict)

    def summary(self) -> dict:
        t = self.tables.topology
        m = self.measurement
        sched = self.schedule
        nh = t.n_hosts
        return {
            "algo": self.tables.algo,
            "spec": t.spec,
            "fabric": self.tables.fabric.to_json_dict(),
            "hosts": nh,
            "predicted_time": m.alltoall_time,
            "route_time": m.alltoall_time,
            "file_time": None if sched is None else sched.predicted_time,
            "per_cable": True,
            "cables": t.n_cables,
            "lp_time": None,
            "bound": None,
            "mcf_time": self.mcf_time,
            "fidelity": None,
            "mcf_ratio": None if self.mcf_time is None else ratio(self.mcf_time, m.alltoall_time),
            "optimal": None,
            "mip_gap": None,
            "layers": self.lanes,
            "deadlock_free": self.deadlock_cycle is None,
            "deadlock": self.deadlock,
            "chunks_per_shard": None if sched is None else sched.schedule.chunks_per_shard,
            "chunks_exact": None if sched is None else sched.chunks_exact,
            "routes": self.tables.n_routes(),
            "max_paths_per_pair": self.tables.layers,
            "lid_layers": self.tables.layers,
            "seconds": float(sum(self.timings.values())),
            "timings": dict(self.timings),
            "info": dict(self.tables.info),
            "pattern": "shift",
            "congestion_worst": m.shift.worst,
            "congestion_avg": m.shift.average,
            "stages": len(m.shift.per_stage),
            "opensm": self.lft,
            "notes": list(self.notes),
        }


def relane(tables: ForwardingTables, scheme: str, max_layers: int | None = None) -> ForwardingTables:
    """The tables with every (layer, pair) route's virtual lane set by deadlock ``scheme`` (LASH keeps a pair
    in one lane); per-hop VCs are dropped.  Builds the per-pair routes (size-limited)."""
    t = tables.topology
    share = tables.share if tables.share is not None else None
    layer, s, d = np.nonzero(share) if share is not None else \
        np.nonzero(np.broadcast_to(~np.eye(t.n_hosts, dtype=bool), (tables.layers, t.n_hosts, t.n_hosts)))
    tables.check_route_count()
    nodes, _ = tables.trace(s, d, layer)
    lane = assign_layers([tuple(r[r >= 0].tolist()) for r in nodes], scheme,
                         pairs=list(zip(s.tolist(), d.tolist())), max_layers=max_layers)
    lanes = np.zeros((tables.layers, t.n_hosts, t.n_hosts), dtype=np.int64)
    lanes[layer, s, d] = lane
    return dataclasses.replace(tables, lanes=lanes, hop_vc=None)


def segment_dfsssp(tables: ForwardingTables) -> np.ndarray:
    """``(layers, N, N)`` virtual lanes of every routed pair by DFSSSP on the tables' router segments
    (:func:`~.layered.segment_lanes`: no per-pair route is built)."""
    t = tables.topology
    pairs = tables.share if tables.share is not None else \
        np.broadcast_to(~np.eye(t.n_hosts, dtype=bool), (tables.layers, t.n_hosts, t.n_hosts))
    layer, s, d = np.nonzero(pairs)
    lane_of, _, of_route = segment_lanes(tables, router_view(t), s, d, layer)
    lanes = np.zeros((tables.layers, t.n_hosts, t.n_hosts), dtype=np.int64)
    lanes[layer, s, d] = lane_of[of_route]
    return lanes


def table_report(topology: Topology, algo: str, fabric: Fabric | None = None, *, deadlock: str | None = None,
                 max_layers: int | None = None, mcf: str = "auto", output: bool = False, max_chunks: int = 64,
                 lft: str | None = None, vls: int = DEFAULT_VLS, progress=None, **options) -> TableReport:
    """Route ``topology`` with table engine ``algo`` and report on the tables (module docstring).

    ``output`` also builds the MPI path schedule (``report.schedule.xml``);
    ``lft`` (the dump's path, used in the printed options) also renders the
    dump and SL file (``report.lft["text"]``, ``["sl_text"]``), refused in one
    line where the SLs would not fit the fabric's ``vls`` data virtual lanes;
    the layered engines fit their lanes into ``vls`` (:func:`~.layered.fit_lanes`).
    """
    fabric = fabric or Fabric()
    timings: dict = {}
    t0 = time.perf_counter()
    if algo in LAYERED_ENGINES:
        options["vls"] = vls
    tables = route_tables(topology, algo, fabric, progress=progress, **options)
    timings["route"] = time.perf_counter() - t0
    if progress:
        progress(f"{algo}: {tables.layers} x {topology.n_nodes} x {topology.n_hosts} forwarding tables in "
                 f"{timings['route']:.2f} s; tracing {tables.n_routes():,} routes")
    if deadlock is not None:
        t1 = time.perf_counter()
        tables = relane(tables, deadlock, max_layers)
        timings["layers"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    measurement = tables.measure(progress)
    cycle = tables.deadlock_cycle(measurement)
    lanes = tables.n_lanes
    timings["measure"] = time.perf_counter() - t1
    if max_layers is not None and lanes > max_layers:
        raise A2AError(f"{algo}: the routes use {lanes} virtual lanes, more than --max-layers {max_layers}; "
                       "choose a --deadlock scheme")
    notes = list(tables.info.get("notes", ()))
    if tables.info.get("routes_dropped"):
        notes.append(f"DFSSSP needed {tables.info['vls_needed']} virtual lanes; the {tables.info['routes_dropped']:,} "
                     f"routes of layers 1.. on lanes past the fabric's {vls} data VLs (--vls) were dropped (their "
                     "pairs use their other layers)")
    t1 = time.perf_counter()
    mcf_time, note = mcf_reference(topology, fabric, mcf, progress)
    if note:
        notes.append(note)
    else:
        timings["mcf"] = time.perf_counter() - t1
    schedule = None
    if output:
        t1 = time.perf_counter()
        if mcf_time is None:
            notes.append("the file records no mcf_time (no link-MCF reference)")
        schedule = route_schedule(topology, algo, fabric, deadlock=None, max_chunks=max_chunks, mcf_time=mcf_time,
                                  mcf=mcf_time is not None, routes=tables.routes())
        timings["file"] = time.perf_counter() - t1
    lft_info = None
    if lft is not None:
        t1 = time.perf_counter()
        lft_info = _lft(tables, lft, cycle, notes, vls)
        timings["lft"] = time.perf_counter() - t1
    return TableReport(tables, measurement, cycle, lanes, deadlock, mcf_time, tuple(notes), schedule, lft_info,
                       timings)


def _lft(tables: ForwardingTables, path: str, cycle: str | None, notes: list, vls: int) -> dict:
    """The dump, the SL file where the routes need lanes, and the opensm options (``a2a routes --lft``); SLs
    past the fabric's ``vls`` data VLs (SL ``i`` on VL ``i``) are refused (:func:`~.opensm.check_sls`)."""
    text, lmc = write_dump(tables)
    sl_path, sl_text, scheme = None, None, None
    lanes = tables.lanes
    if lanes is not None and lanes.max(initial=0) > 0:
        scheme = tables.algo if tables.info.get("vls") else "the --deadlock scheme"
    elif tables.hop_vc is not None:
        # a VC per router hop needs per-port SL-to-VL tables no SM file carries: give per-pair SLs instead
        lanes = segment_dfsssp(tables)
        scheme = "dfsssp (per pair; the engine's VC-per-hop scheme needs per-port SL2VL tables)"
    elif cycle is not None:
        notes.append("the routes are not deadlock-free on one virtual lane and no SLs were assigned "
                     "(--deadlock dfsssp writes an SL file)")
    if scheme is not None:
        check_sls(tables.algo, int(lanes.max()) + 1, vls)
        sl_path = f"{path}.sl"
        sl_text = sl_file(tables, lanes, scheme)
        notes.append(f"OpenSM's file engine installs no SLs: the {int(lanes.max()) + 1} lanes' SLs per (source, "
                     f"destination, LID offset) are in {sl_path}")
    return {"lft": path, "lmc": lmc, "options": opensm_options(path, lmc), "sl_file": sl_path,
            "text": text, "sl_text": sl_text}
