"""Small helpers shared by the three XML readers and writers."""

from __future__ import annotations

import re

from lxml import etree

from ..errors import FormatError

#: Largest integer attribute we accept (guards against absurd sizes in hostile files).
MAX_INT = 2**62
#: Largest buffer (in chunks) a oneCCL or MPI path file may declare: checkers allocate per chunk.
MAX_BUFFER_CHUNKS = 1 << 22


def where(el, source: str) -> str:
    return f"{source}: line {el.sourceline}: <{el.tag}>"


def attr_str(el, name: str, source: str, default: str | None = None) -> str:
    v = el.get(name)
    if v is None:
        if default is None:
            raise FormatError(f"{where(el, source)} is missing attribute {name!r}")
        return default
    return v


def attr_int(el, name: str, source: str, default: int | None = None) -> int:
    v = el.get(name)
    if v is None:
        if default is None:
            raise FormatError(f"{where(el, source)} is missing attribute {name!r}")
        return default
    try:
        x = int(v.strip(), 10)
    except ValueError:
        raise FormatError(f"{where(el, source)} attribute {name}={v!r} is not an integer") from None
    if abs(x) > MAX_INT:
        raise FormatError(f"{where(el, source)} attribute {name}={v!r} is out of range")
    return x


def attr_lp_time(el, source: str) -> float | None:
    """The optional ``lp_time`` root attribute: a positive finite float, or ``None``."""
    v = el.get("lp_time")
    if v is None:
        return None
    try:
        t = float(v)
    except ValueError:
        t = -1.0
    if not (0 < t < float("inf")):
        raise FormatError(f"{where(el, source)} attribute lp_time={v!r} is not a positive number")
    return t


def attr_ints(el, name: str, source: str) -> tuple[int, ...]:
    """A space-separated list of integers, e.g. ``route="0 4 1"``."""
    v = attr_str(el, name, source)
    try:
        xs = tuple(int(t, 10) for t in v.split())
    except ValueError:
        raise FormatError(f"{where(el, source)} attribute {name}={v!r} is not a list of integers") from None
    if any(abs(x) > MAX_INT for x in xs):
        raise FormatError(f"{where(el, source)} attribute {name}={v!r} is out of range")
    return xs


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


def expect_root(root, tag: str, source: str) -> None:
    if root.tag != tag:
        raise FormatError(f"{source}: root element is <{root.tag}>, expected <{tag}>")


def element(parent, tag: str, attrs: list[tuple[str, object]]):
    """Append ``<tag>`` with attributes in the given order (values via ``str``)."""
    el = etree.Element(tag) if parent is None else etree.SubElement(parent, tag)
    for k, v in attrs:
        el.set(k, str(v))
    return el


def serialize(root) -> bytes:
    """Two-space indented XML, no declaration, trailing newline (MSCCL-executor safe)."""
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="ascii", xml_declaration=False) + b"\n"


def program_name(schedule, name: str | None) -> str:
    """``name`` or ``<spec>-<method>``, restricted to characters every tokenizer accepts."""
    raw = name if name is not None else f"{schedule.spec}-{schedule.method}"
    return re.sub(r"[^A-Za-z0-9._:,=+-]", "_", raw)
