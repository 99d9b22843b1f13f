"""Hand-built schedule IR objects for the lowering/verification tests (no solver needed)."""

from a2a_compiler.chunk.ir import LinkSchedule, PathSchedule, Route, Transfer
from a2a_compiler.fabric import Fabric


def ring_links(n):
    return tuple(sorted({(u, (u + s) % n, 1.0) for u in range(n) for s in (1, n - 1)}))


def ring_schedule(n=4, c=2):
    """Bidirectional ring, shortest-way store-and-forward, one hop per step.

    Ties (opposite node on an even ring) go clockwise for even chunk indices and
    counter-clockwise for odd ones.
    """
    paths = {}
    for s in range(n):
        for d in range(n):
            if s == d:
                continue
            for k in range(c):
                cw = (d - s) % n
                step = 1 if (cw < n - cw or (cw == n - cw and k % 2 == 0)) else -1
                nodes = [s]
                while nodes[-1] != d:
                    nodes.append((nodes[-1] + step) % n)
                paths[(s, d, k)] = nodes
    return paths_to_steps(n, c, paths, ring_links(n), f"ring:{n}")


def paths_to_steps(n, c, paths, links, spec, wait=None):
    """Move every chunk one hop per step along its path (``wait[chunk]`` extra idle steps at its first relay)."""
    wait = wait or {}
    timeline = {}
    for ch, p in paths.items():
        t = 0
        for h, (u, v) in enumerate(zip(p, p[1:])):
            if h == 1:
                t += wait.get(ch, 0)
            timeline.setdefault(t, {}).setdefault((u, v), []).append(ch)
            t += 1
    steps = tuple(tuple(Transfer(u, v, tuple(sorted(chs))) for (u, v), chs in sorted(timeline.get(t, {}).items()))
                  for t in range(max(timeline) + 1))
    return LinkSchedule(n, c, steps, links, spec, Fabric(), "tsmcf", 1.0)


def one_link_many_steps(nsteps):
    """Two ranks, C = nsteps: chunk k of each shard crosses the link in step k (one run per step)."""
    paths = {(s, 1 - s, k): [s, 1 - s] for s in range(2) for k in range(nsteps)}
    steps = tuple((Transfer(0, 1, ((0, 1, t),)), Transfer(1, 0, ((1, 0, t),))) for t in range(nsteps))
    assert len(paths) == 2 * nsteps
    return LinkSchedule(2, nsteps, steps, ((0, 1, 1.0), (1, 0, 1.0)), "complete:2", Fabric(), "tsmcf", 1.0)


def star_path_schedule(c=2):
    """3 ranks joined through one switch (node 3); rank pairs also have direct links 0-1.

    Shard 0->1 is split: chunk 0 direct, the rest through the switch.
    """
    links = tuple(sorted({(u, v, 1.0) for a, b in ((0, 3), (1, 3), (2, 3), (0, 1)) for u, v in ((a, b), (b, a))}))
    routes = []
    for s in range(3):
        for d in range(3):
            if s == d:
                continue
            if (s, d) == (0, 1):
                routes += [Route(0, 1, (0, 1), 0, (0,)), Route(0, 1, (0, 3, 1), 1, tuple(range(1, c)), 1)]
            else:
                routes.append(Route(s, d, (s, 3, d), 0, tuple(range(c))))
    return PathSchedule(3, c, tuple(routes), links, 4, "file:star", Fabric(), "mcf-extp", 1.0)
