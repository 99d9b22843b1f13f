"""Hardened XML parsing and the helpers shared by the three formats' readers and writers."""

from __future__ import annotations

import re

from lxml import etree

from ..errors import FormatError, echo

#: Largest XML file we agree to parse (bytes).
MAX_XML_BYTES = 256 * 1024 * 1024
#: Deepest element nesting we accept; every format here is at most 5 deep.
MAX_XML_DEPTH = 16
#: Largest integer attribute we accept (guards against absurd sizes in hostile files).
MAX_INT = 2**62
#: The one lexical form of an integer attribute: ASCII decimal digits, no leading zero, an optional '-'.
#: The MSCCL executor reads integers with ``strtol(value, NULL, 0)``, which takes ``010`` as octal 8,
#: ``0x10`` as hex and stops at the first other character (``0_1``: 0), where Python's ``int`` gives 10,
#: 16 and 1 and also takes non-ASCII digits; the ranges (``cnt`` >= 1, ...) are the formats' rules.
INTEGER = re.compile(r"0|-?[1-9][0-9]*")
INTEGER_FORM = "ASCII digits, no leading zero, an optional '-'"
#: Largest buffer (in chunks) a oneCCL or MPI path file may declare: checkers allocate per chunk.
MAX_BUFFER_CHUNKS = 1 << 22


def parse_xml(data: bytes, source: str = "<xml>") -> etree._Element:
    """Parse untrusted XML safely and return the root element.

    Entity resolution, DTD loading and network access are off, huge trees are
    refused, and so is nesting deeper than :data:`MAX_XML_DEPTH`.  Any problem
    raises :class:`FormatError` naming ``source`` and the line.
    """
    if len(data) > MAX_XML_BYTES:
        raise FormatError(f"{source}: XML is {len(data)} bytes, over the limit")
    if not data.strip():
        raise FormatError(f"{source}: empty file, not a schedule")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise FormatError(f"{source}: DOCTYPE/ENTITY declarations are not allowed")
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=False,   # the a2a-record comment (formats.record); readers skip comments
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


def reader(from_element, what: str):
    """A format's ``parse(data, source)``: :func:`parse_xml` (hardened), then ``from_element``."""
    def parse(data: bytes, source: str = f"<{what}>"):
        return from_element(parse_xml(data, source), source)

    parse.__doc__ = f"Parse {what} XML bytes (hardened parser) into its program; errors name ``source``."
    return parse


def where(el, source: str) -> str:
    """``source: line N: <tag>``, the location prefix of every reader error."""
    return f"{source}: line {el.sourceline}: <{el.tag}>"


def attr_str(el, name: str, source: str, default: str | None = None) -> str:
    """Attribute ``name`` of ``el``; missing and no ``default`` raises :class:`FormatError`."""
    v = el.get(name)
    if v is None and default is None:
        raise FormatError(f"{where(el, source)} is missing attribute {name!r}")
    return default if v is None else v


def attr_int(el, name: str, source: str, default: int | None = None) -> int:
    """Integer attribute ``name`` (:data:`INTEGER`, within :data:`MAX_INT`); see :func:`attr_str`."""
    if default is not None and el.get(name) is None:
        return default
    v = attr_str(el, name, source)
    if not INTEGER.fullmatch(v):
        raise FormatError(f"{where(el, source)} attribute {name}={echo(v)} is not an integer ({INTEGER_FORM})")
    x = int(v)
    if abs(x) > MAX_INT:
        raise FormatError(f"{where(el, source)} attribute {name}={echo(v)} is out of range")
    return x


def attr_ints(el, name: str, source: str) -> tuple[int, ...]:
    """A list of :data:`INTEGER` separated by spaces, e.g. ``route="0 4 1"``."""
    v = attr_str(el, name, source)
    tokens = v.split(" ")
    if not all(INTEGER.fullmatch(t) for t in tokens if t):
        raise FormatError(f"{where(el, source)} attribute {name}={echo(v)} is not a list of integers "
                          f"({INTEGER_FORM}) separated by spaces")
    xs = tuple(int(t) for t in tokens if t)
    if any(abs(x) > MAX_INT for x in xs):
        raise FormatError(f"{where(el, source)} attribute {name}={echo(v)} is out of range")
    return xs


def attr_floats(el, name: str, source: str) -> tuple[float, ...] | None:
    """An optional space-separated list of finite floats >= 0 (a row of demand volumes), or ``None``."""
    v = el.get(name)
    if v is None:
        return None
    try:
        xs = tuple(float(t) for t in v.split())
    except ValueError:
        xs = (-1.0,)
    if any(not (0 <= x < float("inf")) for x in xs):
        raise FormatError(f"{where(el, source)} attribute {name}={echo(v)} is not a list of finite numbers >= 0")
    return xs


def demand_rows(ranks, name: str, source: str, width: int, cast=float) -> tuple | None:
    """Attribute ``name`` of every ``<rank>``: all present (one row of ``width`` entries each) or all absent."""
    rows = [attr_floats(r, name, source) for r in ranks]
    if all(row is None for row in rows):
        return None
    for r, row in zip(ranks, rows):
        if row is None or len(row) != width:
            raise FormatError(f"{where(r, source)} needs {name}= with {width} entries (one per rank), like every "
                              f"<rank> of the file")
    if cast is int and any(x != int(x) for row in rows for x in row):
        raise FormatError(f"{source}: {name}= entries must be whole numbers of chunks")
    return tuple(tuple(cast(x) for x in row) for row in rows)


def demand_attrs(program, rank: int) -> list[tuple[str, object]]:
    """The ``chunks`` / ``volumes`` attributes of ``<rank id=rank>`` of an all-to-allv program (docs/formats.md)."""
    out = []
    if getattr(program, "chunk_counts", None) is not None:
        out.append(("chunks", " ".join(map(str, program.chunk_counts[rank]))))
    if getattr(program, "volumes", None) is not None:
        out.append(("volumes", " ".join(repr(float(v)) for v in program.volumes[rank])))
    return out


def children(el, tag: str, source: str, allowed: tuple[str, ...] = ()) -> list:
    """Child elements named ``tag``; any other child (outside ``allowed``) is an error."""
    out = []
    for c in el:
        if not isinstance(c.tag, str):
            continue  # comments / processing instructions
        if c.tag == tag:
            out.append(c)
        elif c.tag not in allowed:
            raise FormatError(f"{where(c, source)} is not allowed inside <{el.tag}>")
    return out


def rank_elements(root, nranks: int, source: str) -> list:
    """The ``<rank>`` children of a oneCCL-style or MPI path root: exactly ``nranks`` of them."""
    ranks = children(root, "rank", source)
    if len(ranks) != nranks:
        raise FormatError(f"{source}: {len(ranks)} <rank> elements, nranks={nranks}")
    return ranks


def expect_root(root, tag: str, source: str) -> None:
    """Refuse a document whose root element is not ``<tag>``."""
    if root.tag != tag:
        raise FormatError(f"{source}: root element is <{root.tag}>, expected <{tag}>")


def element(parent, tag: str, attrs: list[tuple[str, object]]):
    """Append ``<tag>`` with attributes in the given order (values via ``str``)."""
    el = etree.Element(tag) if parent is None else etree.SubElement(parent, tag)
    for k, v in attrs:
        el.set(k, str(v))
    return el


def root_element(tag: str, program, attrs: list[tuple[str, object]]):
    """The root ``<tag ATTRS>`` of a file, with the program's record (:mod:`.record`) as its first child."""
    root = element(None, tag, attrs)
    if program.record is not None:
        root.append(program.record.comment())
    return root


def serialize(root) -> bytes:
    """Two-space indented XML, no declaration, trailing newline (MSCCL-executor safe)."""
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="ascii", xml_declaration=False) + b"\n"


def safe_name(raw: str) -> str:
    """``raw`` restricted to characters every tokenizer accepts in a ``name`` attribute."""
    return re.sub(r"[^A-Za-z0-9._:,=+-]", "_", raw)
