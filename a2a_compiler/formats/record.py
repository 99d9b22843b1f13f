"""What a schedule file records about how it was made: spec, method, fabric, LP times (docs/formats.md).

Every XML file the compiler writes (MSCCL, oneCCL-style, MPI path) carries one
comment, the first thing inside its root element::

    <algo name="torus:3x3x3-tsmcf" proto="Simple" ...>
      <!-- a2a-record {"fabric": {...}, "lp_time": 13.5, "mcf_time": 13.5, "method": "tsmcf", ...} -->
      <gpu id="0" ...>

A comment because the MSCCL executor's parser allows at most 16 attributes per
element and skips comments; the same comment in all three formats, so one reader serves them.
``a2a verify`` and ``a2a run`` take the fabric, the topology spec and the
bounds from it; files of other tools (msccl-tools) have none.
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
    link-MCF optimum of the fabric.  Times in link-times for unit shards.
    """

    spec: str
    method: str
    fabric: Fabric
    lp_time: float | None = None
    mcf_time: float | None = None

    def to_json_dict(self) -> dict:
        return {"version": VERSION, "spec": self.spec, "method": self.method, "fabric": self.fabric.to_json_dict(),
                "lp_time": self.lp_time, "mcf_time": self.mcf_time}

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
        if not isinstance(d, dict) or d.get("version") != VERSION:
            raise FormatError(f"{where}: expected a version {VERSION} object")
        if not (isinstance(d.get("spec"), str) and isinstance(d.get("method"), str) and isinstance(d.get("fabric"), dict)):
            raise FormatError(f"{where}: needs spec, method (strings) and fabric (object)")
        try:
            fabric = Fabric.from_json_dict(d["fabric"])
        except A2AError as exc:
            raise FormatError(f"{where}: fabric: {exc}") from None
        return cls(d["spec"], d["method"], fabric, *(_time(d.get(k), k, where) for k in ("lp_time", "mcf_time")))


def _time(value, key: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise FormatError(f"{where}: {key}={value!r} is not a positive number")
    return float(value)
