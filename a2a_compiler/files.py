"""Reading and writing files safely: atomic output, bounded input, one JSON loader.

Every stage writes through :func:`atomic_write` (a reader never sees a partial
file, a failure leaves none behind; a symlink's target is written; a FIFO, a
character device or ``-`` gets a plain write; nothing replaces a non-regular
file) and reads through :func:`read_bytes` / :func:`read_json`, which refuse what would hang or exhaust memory (FIFOs,
devices, oversized files) with one :class:`~a2a_compiler.errors.A2AError` line.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path

from . import interrupt
from .errors import A2AError, FormatError

#: Default largest input file (bytes).
MAX_INPUT_BYTES = 256 * 1024 * 1024


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


#: The output path that means standard output.
STDOUT = "-"


def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "not a regular file")


def _target(path: Path) -> tuple[Path, int | None]:
    """Where writing ``path`` lands: a symlink's final target (``realpath``), and its ``st_mode``
    (``None`` for a new file)."""
    real = Path(os.path.realpath(path))
    try:
        return real, os.stat(real).st_mode
    except FileNotFoundError:
        return real, None
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None


def check_writable(path: str | os.PathLike) -> Path:
    """Refuse, before any work, an output ``path`` :func:`atomic_write` could not write.

    ``-`` (standard output), a character device and a FIFO are accepted as they are
    (nothing is opened: opening a FIFO and closing it again would end its reader's
    input); a regular file or a new path must be creatable in its directory (the
    symlink's target's directory for a symlink); a directory, socket or block device
    is refused.
    """
    if str(path) == STDOUT:
        return Path(STDOUT)
    if os.fspath(path) == "":
        raise A2AError("cannot write '': the path is empty")
    path = Path(path)
    real, mode = _target(path)
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            if not os.access(real, os.W_OK):
                raise A2AError(f"cannot write {path}: Permission denied")
            return path
        via = f" ({real})" if real != path.absolute() else ""
        raise A2AError(f"cannot write {path}{via}: it is {_kind(mode)}; give a regular file, a new path, "
                       f"a FIFO, a character device or - (standard output)")
    directory = real.parent
    if not directory.is_dir():
        raise A2AError(f"cannot write {path}: directory {path.parent if real == path.absolute() else directory} "
                       f"does not exist")
    try:  # the real test (os.access says yes to root even where nothing can be created)
        fd, probe = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    os.close(fd)
    os.unlink(probe)
    return path


def atomic_write(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write the output ``data`` to ``path``: atomically wherever the target is a file.

    * a regular file or a new path: a temporary file in the same directory, then
      ``os.replace`` -- readers never see a partial file, a failure leaves none behind;
    * a symlink: the same for its final target (the link stays a link);
    * ``-``: standard output; a character device (``/dev/null``) or a FIFO: a plain
      write into it (a FIFO must have a reader: without one this refuses at once
      instead of blocking);
    * a directory, socket or block device is never replaced: :class:`A2AError`.

    Every problem (missing or unwritable directory, a full device) raises
    :class:`A2AError` naming ``path``.
    """
    interrupt.check()
    if isinstance(data, str):
        data = data.encode()
    path = check_writable(path)
    if str(path) == STDOUT:  # the process's standard output, even while the CLI sends its summary to stderr
        try:
            sys.stdout.flush()
            sys.__stdout__.flush()
            sys.__stdout__.buffer.write(data)
            sys.__stdout__.buffer.flush()
        except BrokenPipeError:  # the CLI ends quietly (e.g. piped into head)
            raise
        except OSError as exc:
            raise A2AError(f"cannot write standard output: {_why(exc)}") from None
        return path
    real, mode = _target(path)
    if mode is not None and not stat.S_ISREG(mode):
        _write_into(path, real, mode, data)
        return path
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644 if mode is None else stat.S_IMODE(mode))
        os.replace(tmp, real)
    except OSError as exc:
        os.unlink(tmp)
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_png(fig, path: str | os.PathLike) -> Path:
    """Save the matplotlib figure ``fig`` to ``path`` as PNG with :func:`atomic_write` (no timestamp
    metadata, so a rerun gives the same bytes) and close it."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return atomic_write(path, buf.getvalue())


def _write_into(path: Path, real: Path, mode: int, data: bytes) -> None:
    """A plain write into a character device or FIFO (never created, truncated or replaced)."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | (os.O_NONBLOCK if stat.S_ISFIFO(mode) else 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(mode):
            raise A2AError(f"cannot write {path}: the FIFO has no reader") from None
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise A2AError(f"cannot write {path}: {_why(exc)}") from None
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read a whole regular file of at most ``limit`` bytes.

    Missing or unreadable files, directories, FIFOs and devices (which would
    block or never end) and oversized files raise :class:`FormatError`.  At
    most ``limit + 1`` bytes are ever read, even if the file grows meanwhile.
    """
    if os.fspath(path) == "":
        raise FormatError("cannot read '': the path is empty")
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


class _NotJson(ValueError):
    """A token Python's decoder accepts and JSON (RFC 8259, so nlohmann::json, which executors parse with)
    does not: ``NaN``, ``Infinity``, a number beyond the doubles' range."""


def _constant(name: str):
    raise _NotJson(f"{name} is not a JSON value")


def _out_of_range(text: str) -> _NotJson:
    return _NotJson(f"the number {text if len(text) <= 24 else text[:20] + '...'} is out of range")


def _finite(text: str) -> float:
    if not math.isfinite(v := float(text)):
        raise _out_of_range(text)
    return v


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 309:     # beyond the doubles (and Python's 4300-digit conversion limit)
        raise _out_of_range(text)
    return int(text)


def parse_json(data: bytes | str, source: str = "<json>"):
    """Decode JSON text; malformed, non-UTF-8 or absurdly nested input, ``NaN``, ``Infinity`` or a number
    beyond the doubles raise :class:`FormatError`."""
    try:
        return json.loads(data, parse_constant=_constant, parse_float=_finite, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except _NotJson as exc:
        raise FormatError(f"{source}: invalid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise FormatError(f"{source}: not UTF-8 text") from None
    except RecursionError:
        raise FormatError(f"{source}: JSON nested too deeply") from None


def read_json(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES):
    """:func:`read_bytes` then :func:`parse_json`: the one loader for every JSON input file."""
    return parse_json(read_bytes(path, limit), str(path))
