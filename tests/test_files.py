"""Bounded, non-blocking input and atomic output (a2a_compiler.files)."""

import os
import stat

import pytest

from a2a_compiler.errors import A2AError, FormatError
from a2a_compiler.files import atomic_write, check_writable, read_bytes, read_json


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


def test_symlink_target_is_written_atomically_and_the_link_stays(tmp_path):
    real = tmp_path / "real.xml"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.xml"
    link.symlink_to("real.xml")
    atomic_write(link, b"new")
    assert link.is_symlink() and os.readlink(link) == "real.xml"
    assert real.read_bytes() == b"new" and (real.stat().st_mode & 0o777) == 0o600   # mode kept
    dangling = tmp_path / "dangling.xml"
    dangling.symlink_to("made.xml")
    atomic_write(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "made.xml").read_bytes() == b"made"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.xml", "link.xml", "made.xml", "real.xml"]


def test_fifo_is_written_through_and_never_replaced(tmp_path):
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    with pytest.raises(A2AError, match=r"cannot write .*out\.fifo: the FIFO has no reader"):
        atomic_write(fifo, b"x")                        # refused at once, not blocked
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    for _ in range(200):                               # the reader opens its end
        try:
            atomic_write(fifo, b"<algo/>\n" * 20000)    # more than a pipe buffer
            break
        except A2AError:
            threading.Event().wait(0.01)
    reader.join(10)
    assert got == [b"<algo/>\n" * 20000]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and list(tmp_path.iterdir()) == [fifo]


def test_character_devices_are_written_not_replaced():
    before = os.stat("/dev/null")
    atomic_write("/dev/null", b"x" * 100)
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    if os.path.exists("/dev/full"):
        with pytest.raises(A2AError, match=r"^cannot write /dev/full: No space left on device$"):
            atomic_write("/dev/full", b"x")
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_sockets_and_directories_are_refused_and_kept(tmp_path):
    import socket

    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        with pytest.raises(A2AError, match=r"cannot write .*s\.sock: it is a socket; give a regular file, a new "
                                           r"path, a FIFO, a character device or - \(standard output\)"):
            check_writable(sock_path)
        link = tmp_path / "to-sock"
        link.symlink_to(sock_path)
        with pytest.raises(A2AError, match=r"to-sock \(.*s\.sock\): it is a socket"):
            atomic_write(link, b"x")
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode) and link.is_symlink()
    with pytest.raises(A2AError, match=r"it is a directory"):
        atomic_write(tmp_path, b"x")


def test_dash_is_standard_output(capfd):
    atomic_write("-", b"<algo/>\n")
    assert capfd.readouterr().out == "<algo/>\n"


def test_cli_dash_output_carries_the_file_alone(tmp_path, capfd):
    from a2a_compiler.cli import main

    assert main(["compile", "hypercube:3", "--emit", "mpi", "-o", str(tmp_path / "hc3.xml"), "-q"]) == 0
    capfd.readouterr()
    assert main(["compile", "hypercube:3", "--emit", "mpi", "-o", "-", "-q"]) == 0
    out, err = capfd.readouterr()
    assert out.encode() == (tmp_path / "hc3.xml").read_bytes()
    assert err.startswith("compiled   hypercube:3 mcf-extp -> mpi") and "saved      -\n" in err
    assert main(["compile", "hypercube:3", "--emit", "mpi", "-o", "-", "--json"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and err == ("a2a compile: error: --json and -o - both write standard output; give -o a file, "
                                 "or drop --json (the summary then goes to stderr)\n")
