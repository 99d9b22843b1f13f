"""What a schedule file records about how it was made: spec, method, fabric, demand, LP times
(docs/formats.md).

Every XML file the compiler writes (MSCCL, oneCCL-style, MPI path) carries one
comment, the first thing inside its root element::

    <algo name="torus:3x3x3-tsmcf" proto="Simple" ...>
      <!-- a2a-record {"fabric": {...}, "lp_time": 13.5, "mcf_time": 13.5, "method": "tsmcf", ...} -->
      <gpu id="0" ...>

A comment because the MSCCL executor's parser allows at most 16 attributes per
element and skips comments; the same comment in all three formats, so one reader serves them.
An MSCCL++ execution plan (JSON) carries the same object as its top-level key
``"a2a_record"`` (the executor reads the keys it knows by name and ignores others).
``a2a verify`` and ``a2a run`` take the fabric, the topology spec, the demand and the
bounds from it; files of other tools (msccl-tools, the MSCCL++ DSL) have none.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from lxml import etree

from ..errors import A2AError, FormatError
from ..fabric import Fabric

#: The comment's first word.
TAG = "a2a-record"
#: Version of the record's JSON object.
VERSION = 1


@dataclass(frozen=True)
class Record:
    """How a schedule file was made.

    ``spec``: the topology spec (with its puncturing, e.g. ``"torus:3x3x3 -links 3 seed=1"``);
    ``method``: the solver or routing engine; ``fabric``; ``lp_time``: the certified optimum
    of the method's own LP (``None`` for a routing with no LP); ``mcf_time``: the certified
    link-MCF optimum of the fabric.  Times in link-times for unit shards.  ``demand``: an
    all-to-allv's ``{ranks, sha256[, volumes]}`` (``Demand.to_json_dict`` without the source; the
    times are then the all-to-allv's), ``None`` for the plain all-to-all.  ``volumes``
    are recorded where the format has no place of its own for them (MSCCL XML, MSCCL++ plans); oneCCL-style
    and MPI path files keep them in ``<rank volumes=...>``.  ``target``: the MSCCL executor the file was
    compiled for (``compile --target``; :data:`~a2a_compiler.formats.msccl_rules.TARGETS`), ``None`` when none
    was named; ``a2a verify`` checks its limits by default.
    """

    spec: str
    method: str
    fabric: Fabric
    lp_time: float | None = None
    mcf_time: float | None = None
    demand: dict | None = None
    target: str | None = None

    def to_json_dict(self) -> dict:
        return {"version": VERSION, "spec": self.spec, "method": self.method, "fabric": self.fabric.to_json_dict(),
                "lp_time": self.lp_time, "mcf_time": self.mcf_time,
                **({} if self.demand is None else {"demand": self.demand}),
                **({} if self.target is None else {"target": self.target})}

    def demand_volumes(self, source: str):
        """The recorded all-to-allv :class:`~a2a_compiler.demand.Demand` when the record holds its
        volumes, else ``None``."""
        if self.demand is None or "volumes" not in self.demand:
            return None
        from ..demand import Demand

        return Demand.from_volumes(self.demand["volumes"], f"{source}: {TAG} demand")

    def comment(self) -> etree._Comment:
        """The ``<!-- a2a-record {...} -->`` comment (``--`` cannot occur in a comment: escaped in the JSON)."""
        text = json.dumps(self.to_json_dict(), sort_keys=True).replace("--", "-\\u002d")
        return etree.Comment(f" {TAG} {text} ")

    @classmethod
    def from_root(cls, root, source: str) -> "Record | None":
        """The record of a parsed root element (comments kept), ``None`` when there is none; a
        malformed record raises :class:`FormatError`."""
        for c in root:
            if isinstance(c, etree._Comment) and (c.text or "").strip().startswith(TAG + " "):
                return cls.from_text(c.text.strip()[len(TAG):], f"{source}: line {c.sourceline}: {TAG}")
        return None

    @classmethod
    def from_text(cls, text: str, where: str) -> "Record":
        try:
            d = json.loads(text)
        except (ValueError, RecursionError):
            raise FormatError(f"{where}: not a JSON object") from None
        return cls.from_json_dict(d, where)

    @classmethod
    def from_json_dict(cls, d, where: str) -> "Record":
        """The record of a decoded JSON object (:meth:`to_json_dict`); a malformed one raises :class:`FormatError`."""
        if not isinstance(d, dict) or d.get("version") != VERSION:
            raise FormatError(f"{where}: expected a version {VERSION} object")
        if not (isinstance(d.get("spec"), str) and isinstance(d.get("method"), str) and isinstance(d.get("fabric"), dict)):
            raise FormatError(f"{where}: needs spec, method (strings) and fabric (object)")
        try:
            fabric = Fabric.from_json_dict(d["fabric"])
        except A2AError as exc:
            raise FormatError(f"{where}: fabric: {exc}") from None
        demand = d.get("demand")
        if demand is not None and not (isinstance(demand, dict) and isinstance(demand.get("sha256"), str)
                                       and isinstance(demand.get("volumes", []), list)):
            raise FormatError(f"{where}: demand must be an object with sha256 (and volumes, a list of rows)")
        target = d.get("target")
        if target is not None and not isinstance(target, str):
            raise FormatError(f"{where}: target must be a string")
        return cls(d["spec"], d["method"], fabric, *(_time(d.get(k), k, where) for k in ("lp_time", "mcf_time")),
                   demand, target)


def recorded_demand(program, source: str):
    """The all-to-allv :class:`~a2a_compiler.demand.Demand` a program was compiled for: its ``volumes``
    (oneCCL-style, MPI path files), else its record's (MSCCL); ``None`` for the plain all-to-all."""
    volumes = getattr(program, "volumes", None)
    if volumes is not None:
        from ..demand import Demand

        return Demand.from_volumes(volumes, source)
    record = getattr(program, "record", None)
    return None if record is None else record.demand_volumes(source)


def _time(value, key: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise FormatError(f"{where}: {key}={value!r} is not a positive number")
    return float(value)
