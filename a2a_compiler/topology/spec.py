"""Topology spec strings: ``family:arg,arg,key=value``.

``from_spec("torus:3x3x3")`` is the one entry point every command uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import SpecError
from . import generators as gen
from .model import Topology


@dataclass(frozen=True)
class Family:
    """One spec family: its syntax, an example, how to build it, and its host count from the parameters
    alone (``None``: only building tells; the builder checks the parameters, see :func:`spec_hosts`)."""

    name: str
    syntax: str
    example: str
    build: Callable[[list[str], dict[str, str], str], Topology]
    hosts: Callable[[list[str], dict[str, str], str], int] | None = None


def _int(value: str, param: str, spec: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SpecError(f"{spec}: parameter {param} must be an integer, got {value!r}") from None


def _args(pos: list[str], kw: dict[str, str], spec: str, names: list[str], keys: dict[str, int] | None = None):
    """Check arity and keywords; return positional ints and keyword ints (with defaults)."""
    keys = keys or {}
    if len(pos) != len(names):
        want = ",".join(names) if names else "no parameters"
        raise SpecError(f"{spec}: expected {want}, got {len(pos)} positional parameter(s)")
    unknown = sorted(set(kw) - set(keys))
    if unknown:
        raise SpecError(f"{spec}: unknown option(s) {', '.join(unknown)}; allowed: {', '.join(keys) or 'none'}")
    ints = [_int(v, n, spec) for v, n in zip(pos, names)]
    opts = {k: _int(kw[k], k, spec) if k in kw else d for k, d in keys.items()}
    return ints, opts


def _call(build, pos, kw, spec, names, keys=None):
    ints, opts = _args(pos, kw, spec, names, keys)
    return build(*ints, **opts)


def _torus(pos, kw, spec):
    if len(pos) != 1 or set(kw) - {"p"}:
        raise SpecError(f"{spec}: expected torus:K1xK2x...[,p=P], e.g. torus:3x3x3")
    p = _int(kw["p"], "p", spec) if "p" in kw else 0
    return gen.torus(tuple(_int(k, f"k{m + 1}", spec) for m, k in enumerate(pos[0].split("x"))), p)


def _fattree(pos, kw, spec):
    ints, opts = _args(pos, kw, spec, ["k", "n"], {"merge": 1, "hosts": None})
    return gen.fattree(*ints, **opts)


def _vartree(pos, kw, spec):
    if not pos:
        raise SpecError(f"{spec}: expected vartree:K0,M0,M1,...[,w=W][,merge=M][,hosts=H], e.g. vartree:4,2,2")
    width = kw.pop("w", "1")
    ints, opts = _args(pos, kw, spec, ["K0"] + [f"M{j}" for j in range(len(pos) - 1)], {"merge": 1, "hosts": None})
    widths = tuple(_int(x, "w", spec) for x in width.split("x"))
    return gen.var_ary_tree(ints[0], tuple(ints[1:]), widths if len(widths) > 1 else widths[0], **opts)


def _nvswitch(pos, kw, spec):
    fabric = kw.pop("fabric", "rail")
    ints, _ = _args(pos, kw, spec, ["NODES", "GPUS"])
    return gen.nvswitch(*ints, fabric=fabric)


def _product(values) -> int:
    """The product of ``values``, at most ``MAX_NODES + 1`` (a size, never a huge integer)."""
    n = 1
    for v in values:
        n = min(n * v, gen.MAX_NODES + 1)
    return n


def _torus_hosts(pos, kw, spec):
    if len(pos) != 1 or set(kw) - {"p"}:
        raise SpecError(spec)
    dims = [_int(k, f"k{m + 1}", spec) for m, k in enumerate(pos[0].split("x"))]
    return _product(dims) * max(_int(kw.get("p", "0"), "p", spec), 1)


def _vartree_hosts(pos, kw, spec):
    kw = {k: v for k, v in kw.items() if k != "w"}
    ints, opts = _args(pos, kw, spec, ["K0"] + [f"M{j}" for j in range(len(pos) - 1)], {"merge": 1, "hosts": None})
    return _product(ints) if opts["hosts"] is None else opts["hosts"]


def _file(pos, kw, spec):
    from .files import load_topology_file

    if len(pos) != 1 or kw:
        raise SpecError(f"{spec}: expected file:PATH")
    return load_topology_file(pos[0])


def _ibnet(pos, kw, spec):
    from .ibnet import load_ibnet

    if len(pos) != 1 or kw or not pos[0]:
        raise SpecError(f"{spec}: expected ibnet:PATH (an ibnetdiscover output file)")
    return load_ibnet(pos[0])


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("complete", "complete:N", "complete:8", lambda p, k, s: gen.complete(*_args(p, k, s, ["N"])[0]),
               lambda p, k, s: _call(int, p, k, s, ["N"])),
        Family("ring", "ring:N", "ring:8", lambda p, k, s: gen.ring(*_args(p, k, s, ["N"])[0]),
               lambda p, k, s: _call(int, p, k, s, ["N"])),
        Family("bipartite", "bipartite:n  (K_{n,n})", "bipartite:4",
               lambda p, k, s: gen.complete_bipartite(*_args(p, k, s, ["n"])[0]),
               lambda p, k, s: _call(lambda n: 2 * n, p, k, s, ["n"])),
        Family("hypercube", "hypercube:d", "hypercube:3", lambda p, k, s: gen.hypercube(*_args(p, k, s, ["d"])[0]),
               lambda p, k, s: _call(lambda d: gen.power(2, d), p, k, s, ["d"])),
        Family("twisted-hypercube", "twisted-hypercube:d", "twisted-hypercube:3",
               lambda p, k, s: gen.twisted_hypercube(*_args(p, k, s, ["d"])[0]),
               lambda p, k, s: _call(lambda d: gen.power(2, d), p, k, s, ["d"])),
        Family("torus", "torus:K1xK2x...[,p=P]  (p hosts per router; default 0: routers are hosts)", "torus:3x3x3",
               _torus, _torus_hosts),
        Family("petersen", "petersen", "petersen", lambda p, k, s: (_args(p, k, s, []), gen.petersen())[1],
               lambda p, k, s: _call(lambda: 10, p, k, s, [])),
        Family("genkautz", "genkautz:N,d", "genkautz:64,4", lambda p, k, s: gen.genkautz(*_args(p, k, s, ["N", "d"])[0]),
               lambda p, k, s: _call(lambda n, d: n, p, k, s, ["N", "d"])),
        Family("slimfly", "slimfly:q[,p=P]  (q prime power; default p=ceil(k'/2); p=0: routers are hosts)",
               "slimfly:5", lambda p, k, s: _call(gen.slimfly, p, k, s, ["q"], {"p": None}),
               lambda p, k, s: _call(lambda q, p: 2 * q * q * max(gen.slimfly_hosts_per_router(q) if p is None else p, 1),
                                     p, k, s, ["q"], {"p": None})),
        Family("xpander", "xpander:d,l[,seed=S]", "xpander:4,8,seed=1",
               lambda p, k, s: _call(gen.xpander, p, k, s, ["d", "l"], {"seed": 0}),
               lambda p, k, s: _call(lambda d, l, seed: (d + 1) * l, p, k, s, ["d", "l"], {"seed": 0})),
        Family("jellyfish", "jellyfish:N,d[,seed=S]", "jellyfish:64,4,seed=1",
               lambda p, k, s: _call(gen.jellyfish, p, k, s, ["N", "d"], {"seed": 0}),
               lambda p, k, s: _call(lambda n, d, seed: n, p, k, s, ["N", "d"], {"seed": 0})),
        Family("dragonfly", "dragonfly:a,h,p  (p=0: routers are hosts)", "dragonfly:4,2,2",
               lambda p, k, s: _call(gen.dragonfly, p, k, s, ["a", "h", "p"]),
               lambda p, k, s: _call(lambda a, h, per: (a * h + 1) * a * max(per, 1), p, k, s, ["a", "h", "p"])),
        Family("hyperx", "hyperx:S,L[,p=P]  (default p=1)", "hyperx:4,2,p=1",
               lambda p, k, s: _call(gen.hyperx, p, k, s, ["S", "L"], {"p": 1}),
               lambda p, k, s: _call(lambda base, dims, p: gen.power(base, dims) * max(p, 1), p, k, s, ["S", "L"],
                                     {"p": 1})),
        Family("fattree", "fattree:k,n[,merge=M][,hosts=H]  (k-ary n-tree; merged roots, partial population)",
               "fattree:4,3", _fattree,
               lambda p, k, s: _call(lambda arity, n, merge, hosts: gen.power(arity, n) if hosts is None else hosts,
                                     p, k, s, ["k", "n"], {"merge": 1, "hosts": None})),
        Family("vartree", "vartree:K0,M0,M1,...[,w=W|W0xW1x...][,merge=M][,hosts=H]  (var-ary-n-tree)",
               "vartree:4,2,2", _vartree, _vartree_hosts),
        Family("nvswitch", "nvswitch:NODES,GPUS[,fabric=rail|ring|complete|hypercube|torusK1xK2...]  (GPU servers "
               "on NVSwitches, one NIC per GPU; rail switches or a direct-connect fabric of servers)",
               "nvswitch:2,4", _nvswitch,
               lambda p, k, s: _call(lambda n, g: n * g, p, {x: v for x, v in k.items() if x != "fabric"}, s,
                                     ["NODES", "GPUS"])),
        Family("file", "file:PATH  (JSON topology or edge list)", "file:my.json", _file),
        Family("ibnet", "ibnet:PATH  (ibnetdiscover output: switches, CA ports, GUIDs, ports, cables)",
               "ibnet:fabric.txt", _ibnet),
    ]
}


def parse_spec(spec: str) -> tuple[str, list[str], dict[str, str]]:
    """Split ``family:a,b,key=v`` into ``(family, [a, b], {key: v})``."""
    spec = spec.strip()
    family, _, rest = spec.partition(":")
    family = family.strip().lower()
    if family in ("file", "ibnet"):
        return family, [rest], {}
    pos: list[str] = []
    kw: dict[str, str] = {}
    parts = [p.strip() for p in rest.split(",")] if rest.strip() else []
    if "" in parts:
        raise SpecError(f"{spec}: an empty parameter (a stray comma)")
    for part in parts:
        if "=" in part:
            key, _, value = part.partition("=")
            if key.strip() in kw:
                raise SpecError(f"{spec}: parameter {key.strip()} is given twice")
            kw[key.strip()] = value.strip()
        else:
            pos.append(part)
    return family, pos, kw


def spec_hosts(spec: str) -> int | None:
    """The number of hosts ``spec`` names, from its parameters alone (nothing is built), or ``None`` when
    they do not tell (``file:``, ``ibnet:``, an unknown family) or give no size the builder accepts."""
    family, pos, kw = parse_spec(spec)
    f = FAMILIES.get(family)
    if f is None or f.hosts is None:
        return None
    try:
        n = f.hosts(pos, dict(kw), spec.strip())
    except SpecError:
        return None
    return n if 1 <= n <= gen.MAX_NODES else None


def from_spec(spec: str) -> Topology:
    """Build the topology a spec string names (no puncturing; see :mod:`.puncture`)."""
    family, pos, kw = parse_spec(spec)
    if family not in FAMILIES:
        known = ", ".join(f.syntax.split()[0] for f in FAMILIES.values())
        raise SpecError(f"unknown topology family {family!r} in {spec!r}; known families: {known}")
    return FAMILIES[family].build(pos, kw, spec.strip())
