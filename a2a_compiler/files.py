"""Reading and writing files safely: atomic output, bounded input, one JSON loader.

Every stage writes through :func:`atomic_write` (a reader never sees a partial
file, a failure leaves none behind) and reads through :func:`read_bytes` /
:func:`read_json`, which refuse what would hang or exhaust memory (FIFOs,
devices, oversized files) with one :class:`~a2a_compiler.errors.A2AError` line.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from .errors import A2AError, FormatError

#: Default largest input file (bytes).
MAX_INPUT_BYTES = 256 * 1024 * 1024


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable(path: str | os.PathLike) -> Path:
    """Refuse, before any work, an output ``path`` :func:`atomic_write` could not write."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise A2AError(f"cannot write {path}: directory {directory} does not exist")
    if path.is_dir():
        raise A2AError(f"cannot write {path}: it is a directory")
    try:  # the real test (os.access says yes to root even where nothing can be created)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def atomic_write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``.

    Readers never see a partial file, and a failure leaves no file behind.  A
    missing or unwritable directory, or a ``path`` that is a directory, raises
    :class:`A2AError` naming the path.
    """
    path = check_writable(path)
    directory = path.parent if str(path.parent) else Path(".")
    if isinstance(data, str):
        data = data.encode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read_bytes(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read a whole regular file of at most ``limit`` bytes.

    Missing or unreadable files, directories, FIFOs and devices (which would
    block or never end) and oversized files raise :class:`FormatError`.  At
    most ``limit + 1`` bytes are ever read, even if the file grows meanwhile.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {_why(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise FormatError(f"cannot read {path}: it is a directory")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or \
            stat.S_ISBLK(st.st_mode) else "not a regular file"
        raise FormatError(f"cannot read {path}: it is {kind}; give a regular file")
    if st.st_size > limit:
        raise FormatError(f"{path}: file is {st.st_size} bytes, over the {limit}-byte limit")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {_why(exc)}") from None
    if len(data) > limit:
        raise FormatError(f"{path}: file is over the {limit}-byte limit")
    return data


def read_text(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES) -> str:
    """:func:`read_bytes` then UTF-8 decoding; non-UTF-8 input raises :class:`FormatError` naming the byte."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def parse_json(data: bytes | str, source: str = "<json>"):
    """Decode JSON text; malformed, non-UTF-8 or absurdly nested input raises :class:`FormatError`."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise FormatError(f"{source}: not UTF-8 text") from None
    except RecursionError:
        raise FormatError(f"{source}: JSON nested too deeply") from None


def read_json(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES):
    """:func:`read_bytes` then :func:`parse_json`: the one loader for every JSON input file."""
    return parse_json(read_bytes(path, limit), str(path))
