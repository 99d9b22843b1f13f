"""Bounded, non-blocking input and atomic output (a2a_compiler.files)."""

import os

import pytest

from a2a_compiler.errors import A2AError, FormatError
from a2a_compiler.files import atomic_write, read_bytes, read_json


def test_read_refuses_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "topo.fifo"
    os.mkfifo(fifo)
    with pytest.raises(FormatError, match=r"topo\.fifo: it is a FIFO; give a regular file"):
        read_bytes(fifo)


def test_read_refuses_devices_and_directories(tmp_path):
    with pytest.raises(FormatError, match=r"cannot read /dev/zero: it is a device"):
        read_bytes("/dev/zero")
    with pytest.raises(FormatError, match=r"it is a directory"):
        read_bytes(tmp_path)


def test_read_limit_and_deep_json(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    with pytest.raises(FormatError, match=r"big\.json: file is 101 bytes, over the 100-byte limit"):
        read_bytes(big, limit=100)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match=r"deep\.json: JSON nested too deeply"):
        read_json(deep)


def test_atomic_write_errors_name_the_path(tmp_path):
    with pytest.raises(A2AError, match=r"cannot write .*/nope/x\.xml: directory .*/nope does not exist"):
        atomic_write(tmp_path / "nope" / "x.xml", b"x")
    with pytest.raises(A2AError, match=r"cannot write .*: it is a directory"):
        atomic_write(tmp_path, b"x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores directory permissions; use a read-only mount instead
            target = "/proc/a2a-test.xml"
            with pytest.raises(A2AError, match=r"cannot write /proc/a2a-test\.xml: "):
                atomic_write(target, b"x")
        else:
            with pytest.raises(A2AError, match=r"cannot write .*/ro/x\.xml: Permission denied"):
                atomic_write(ro / "x.xml", b"x")
    finally:
        ro.chmod(0o700)
    assert list(tmp_path.iterdir()) == [ro] and list(ro.iterdir()) == []
