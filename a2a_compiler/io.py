"""Atomic file output and hardened XML parsing, shared by every stage."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from lxml import etree

from .errors import FormatError

#: Largest XML file we agree to parse (bytes).
MAX_XML_BYTES = 256 * 1024 * 1024
#: Deepest element nesting we accept; every format here is at most 5 deep.
MAX_XML_DEPTH = 16


def atomic_write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``.

    Readers never see a partial file, and a failure leaves no file behind.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise FormatError(f"cannot write {path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read_bytes(path: str | os.PathLike, limit: int = MAX_XML_BYTES) -> bytes:
    """Read a whole input file, refusing missing, unreadable or oversized files."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > limit:
        raise FormatError(f"{path}: file is {size} bytes, over the {limit}-byte limit")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_xml(data: bytes, source: str = "<xml>") -> etree._Element:
    """Parse untrusted XML safely and return the root element.

    Entity resolution, DTD loading and network access are off, huge trees are
    refused, and so is nesting deeper than :data:`MAX_XML_DEPTH`.  Any problem
    raises :class:`FormatError` naming ``source`` and the line.
    """
    if len(data) > MAX_XML_BYTES:
        raise FormatError(f"{source}: XML is {len(data)} bytes, over the limit")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise FormatError(f"{source}: DOCTYPE/ENTITY declarations are not allowed")
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"{source}: malformed XML at line {exc.lineno}: {exc.msg}") from None
    for el in root.iter():
        depth = sum(1 for _ in el.iterancestors())
        if depth > MAX_XML_DEPTH:
            raise FormatError(f"{source}: line {el.sourceline}: nesting deeper than {MAX_XML_DEPTH}")
    return root
