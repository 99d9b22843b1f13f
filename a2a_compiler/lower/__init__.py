"""Lowering: schedule IR -> MSCCL XML, oneCCL-style XML, MPI path schedules (Basu et al. §4).

Readers and writers for the three formats, plus format detection by root element.
"""

from __future__ import annotations

import os

from ..errors import FormatError
from ..io import parse_xml, read_bytes
from .msccl import msccl_from_element, msccl_to_xml, parse_msccl
from .mpi_paths import mpi_paths_from_element, mpi_paths_to_xml, parse_mpi_paths
from .oneccl import oneccl_from_element, oneccl_to_xml, parse_oneccl
from .programs import MpiPathProgram, MscclProgram, OnecclProgram

#: Format name -> (root element, builder from a parsed root, writer).
FORMATS = {
    "msccl": ("algo", msccl_from_element, msccl_to_xml),
    "oneccl": ("oneccl_algo", oneccl_from_element, oneccl_to_xml),
    "mpi": ("mpi_paths", mpi_paths_from_element, mpi_paths_to_xml),
}

__all__ = [
    "FORMATS", "load_program", "parse_program", "program_to_xml",
    "parse_msccl", "msccl_to_xml", "parse_oneccl", "oneccl_to_xml", "parse_mpi_paths", "mpi_paths_to_xml",
]


def parse_program(data: bytes, source: str = "<xml>") -> tuple[str, MscclProgram | OnecclProgram | MpiPathProgram]:
    """Parse any of the three formats, detected by the root element.

    Returns ``(format_name, program)`` with ``format_name`` in :data:`FORMATS`.
    Malformed or hostile input raises :class:`FormatError`.
    """
    root = parse_xml(data, source)
    for name, (tag, build, _) in FORMATS.items():
        if root.tag == tag:
            return name, build(root, source)
    roots = ", ".join(f"<{t}>" for t, _, _ in FORMATS.values())
    raise FormatError(f"{source}: unknown schedule format: root element <{root.tag}> (expected one of {roots})")


def load_program(path: str | os.PathLike):
    """Read and parse a schedule file (any format); see :func:`parse_program`."""
    return parse_program(read_bytes(path), str(path))


def program_to_xml(program) -> bytes:
    """Serialise any of the three program types with its format's writer."""
    kinds = {MscclProgram: msccl_to_xml, OnecclProgram: oneccl_to_xml, MpiPathProgram: mpi_paths_to_xml}
    return kinds[type(program)](program)
