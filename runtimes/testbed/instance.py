"""A testbed instance: bring it up, run MPI jobs across it, steer path schedules, take it down."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from a2a_compiler import interrupt
from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.files import atomic_write
from a2a_compiler.routes import RouteSet
from a2a_compiler.topology.model import Topology

from . import build, launch
from .cleanup import instances, read_state, remove, require_root, state_dir
from .layout import Layout
from .routes import default_routes, forwarding_table, install_default, install_steering, steering

#: Above this many bytes/s of emulated capacity (:meth:`~.layout.Layout.aggregate_rate`) 2 cores cannot
#: forward and run the ranks too: measured, the kernel moves about 0.5 GB/s of jumbo frames per core of
#: softirq time; keep it to about half the machine (docs/testbed.md).
MAX_AGGREGATE_BPS = 600e6


class Testbed:
    """A running instance (see :func:`Testbed.up`); ``with`` takes it down at the end."""

    def __init__(self, layout: Layout, routes: RouteSet):
        self.layout, self.routes = layout, routes
        self.state_dir = state_dir(layout.name)
        self._next_route = 0

    @classmethod
    def up(cls, topology: Topology, fabric: Fabric, name: str, *, routes: RouteSet | None = None,
           owner: bool = True, force: bool = False, progress=None) -> "Testbed":
        """Build instance ``name`` (refused if it exists) with ``routes`` (default :func:`default_routes`).

        ``owner``: record this process as the owner (``list`` shows the
        instance as stale once it is gone).  Refuses fabrics whose aggregate
        emulated rate exceeds :data:`MAX_AGGREGATE_BPS` unless ``force``.
        On any failure, everything built so far is removed.
        """
        require_root()
        layout = Layout(name, topology, fabric)
        if name in instances():
            raise A2AError(f"testbed {name!r} already exists; take it down with 'a2a testbed down --name {name}'")
        rate = layout.aggregate_rate()
        if rate > MAX_AGGREGATE_BPS and not force:
            raise A2AError(f"{topology.spec} at {fabric.describe()} asks the kernel to forward up to "
                           f"{rate / 1e6:.0f} MB/s, more than 2 cores sustain beside the ranks "
                           f"({MAX_AGGREGATE_BPS / 1e6:.0f} MB/s); lower --link-bw and --host-bw, or --force")
        routes = routes or default_routes(topology, fabric)
        forwarding_table(routes)
        tb = cls(layout, routes)
        try:
            tb.state_dir.mkdir(parents=True)
            atomic_write(tb.state_dir / "state.json", json.dumps({
                "name": name, "owner_pid": os.getpid() if owner else None, "created": time.time(),
                "topology": topology.to_json_dict(), "fabric": fabric.to_json_dict(), "routes": routes.algo,
                "paths": [[p.src, p.dst, list(p.nodes)] for p in routes.paths]}))
            with interrupt.deferred(), build.Handles() as ns:  # Ctrl-C: after the build, then torn down
                build.create(layout, ns, progress)
                install_default(layout, ns, routes)
            interrupt.check()
        except BaseException:
            remove(name)
            raise
        return tb

    @classmethod
    def attach(cls, name: str) -> "Testbed":
        """The running instance ``name`` (built by ``a2a testbed up``)."""
        require_root()
        st = read_state(name)
        if st is None or name not in instances():
            raise A2AError(f"no testbed named {name!r}; 'a2a testbed list' shows the running ones")
        from a2a_compiler.routes import RoutedPath

        topology = Topology.from_json_dict(st["topology"], f"testbed {name}")
        fabric = Fabric.from_json_dict(st["fabric"])
        paths = tuple(RoutedPath(s, d, tuple(nodes), 1.0) for s, d, nodes in st["paths"])
        return cls(Layout(name, topology, fabric), RouteSet(st["routes"], topology, fabric, paths))

    def down(self) -> int:
        return remove(self.layout.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()
        return False

    def steer(self, program) -> dict:
        """Install steered routes for MPI path ``program``: ``{(src, dst, route_id): (src_ip, dst_ip)}``."""
        steered = steering(program, self._next_route)
        self._next_route += len(steered)
        with interrupt.deferred(), build.Handles() as ns:
            install_steering(self.layout, ns, steered)
        return {(s.src, s.dst, s.route_id): (a, b) for s, a, b in steered}

    def run(self, argv: list[str], timeout: float, **kwargs) -> launch.Finished:
        """Run ``argv`` as one rank per host (see :func:`runtimes.testbed.launch.run`)."""
        return launch.run(self.layout, Path(self.state_dir), argv, timeout, **kwargs)
