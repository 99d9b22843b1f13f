"""The lowered file formats (docs/formats.md): program, reader and writer, one module each.

=========== ================== =========================================
format      root element       module
=========== ================== =========================================
``msccl``   ``<algo>``         :mod:`.msccl` (MSCCL executor XML)
``oneccl``  ``<oneccl_algo>``  :mod:`.oneccl` (oneCCL-style XML)
``mpi``     ``<mpi_paths>``    :mod:`.mpi_paths` (MPI path schedule XML)
``mscclpp`` a JSON object      :mod:`.mscclpp` (MSCCL++ execution plan)
=========== ================== =========================================

The lowering builds these programs, the verifier and the MPI runtime read them;
none of them imports the lowering.  :func:`parse_program` detects the format: JSON
is an MSCCL++ plan, XML goes by its root element.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import FormatError
from ..files import read_bytes
from . import mpi_paths, msccl, oneccl
from .mscclpp import MscclppProgram, is_plan, looks_like_plan, mscclpp_to_json, parse_mscclpp
from .mpi_paths import MpiPathProgram, PathSend, mpi_paths_to_xml, parse_mpi_paths
from .msccl import MscclGpu, MscclProgram, MscclStep, MscclThreadBlock, msccl_to_xml, parse_msccl
from .oneccl import OnecclOp, OnecclProgram, OnecclRank, oneccl_to_xml, parse_oneccl
from .xmlutil import parse_xml

Program = MscclProgram | OnecclProgram | MpiPathProgram | MscclppProgram


class Format(NamedTuple):
    """One format: its root element, program type, reader (from a parsed root) and writer."""

    root: str
    program: type
    from_element: object
    to_xml: object


#: Format name -> :class:`Format`.
FORMATS = {
    "msccl": Format(msccl.ROOT, MscclProgram, msccl.msccl_from_element, msccl_to_xml),
    "oneccl": Format(oneccl.ROOT, OnecclProgram, oneccl.oneccl_from_element, oneccl_to_xml),
    "mpi": Format(mpi_paths.ROOT, MpiPathProgram, mpi_paths.mpi_paths_from_element, mpi_paths_to_xml),
    "mscclpp": Format(None, MscclppProgram, None, mscclpp_to_json),
}


def detect_format(root, source: str = "<xml>") -> str:
    """The name in :data:`FORMATS` whose root element is ``root``'s tag, else :class:`FormatError`."""
    for name, f in FORMATS.items():
        if f.root is not None and root.tag == f.root:
            return name
    roots = ", ".join(f"<{f.root}>" for f in FORMATS.values() if f.root is not None)
    raise FormatError(f"{source}: unknown schedule format: root element <{root.tag}> (expected one of {roots})")


def parse_program(data: bytes, source: str = "<xml>") -> tuple[str, Program]:
    """Parse any of the formats: JSON is an MSCCL++ plan, XML is detected by its root element.

    Returns ``(format_name, program)``.  Malformed or hostile input raises
    :class:`FormatError`.
    """
    if looks_like_plan(data):
        return "mscclpp", parse_mscclpp(data, source)
    root = parse_xml(data, source)
    name = detect_format(root, source)
    return name, FORMATS[name].from_element(root, source)


def schedule_format(data: bytes, source: str = "<file>") -> str | None:
    """The format of a schedule file by its content, ``None`` for well-formed XML or JSON of another kind
    (another root element; JSON that is not :func:`~.mscclpp.is_plan`).  Malformed input raises
    :class:`FormatError`: a corrupt schedule never passes for another file."""
    from ..files import parse_json

    if looks_like_plan(data):
        return "mscclpp" if is_plan(parse_json(data, source)) else None
    root = parse_xml(data, source)
    return next((name for name, f in FORMATS.items() if f.root == root.tag), None)


def load_program(path: str | os.PathLike) -> tuple[str, Program]:
    """Read and parse a schedule file (any format); see :func:`parse_program`."""
    return parse_program(read_bytes(path), str(path))


def program_to_xml(program: Program) -> bytes:
    """Serialise any program type with its format's writer (an MSCCL++ plan as JSON)."""
    for f in FORMATS.values():
        if type(program) is f.program:
            return f.to_xml(program)
    raise TypeError(f"not a schedule program: {type(program).__name__}")


__all__ = [
    "FORMATS", "Format", "Program", "detect_format", "parse_program", "load_program", "program_to_xml",
    "schedule_format",
    "parse_msccl", "msccl_to_xml", "parse_oneccl", "oneccl_to_xml", "parse_mpi_paths", "mpi_paths_to_xml",
    "MscclProgram", "MscclGpu", "MscclThreadBlock", "MscclStep", "OnecclProgram", "OnecclRank", "OnecclOp",
    "MpiPathProgram", "PathSend", "MscclppProgram", "parse_mscclpp", "mscclpp_to_json",
]
