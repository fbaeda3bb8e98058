"""Moving bytes between srun, its tasks and the terminal: stdin to every task (``Broadcast``),
task output with ``-l`` labels (``LabelPump``), ``--pty`` through ``qrsh -inherit`` (``PtyRelay``),
window sizes and raw mode."""

from __future__ import annotations

import fcntl
import os
import threading
from typing import Sequence

# ---------------------------------------------------------------------------------------------
# Moving bytes: stdin to every task, task output with labels


def write_all(fd: int, data: bytes) -> bool:
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
        return True
    except OSError:
        return False


class Broadcast(threading.Thread):
    """srun's default stdin: every byte read goes to every task (and every remote launcher);
    end of input closes them all."""

    def __init__(self, src: int, sinks: list[int]):
        super().__init__(daemon=True)
        self.src = src
        self.sinks = list(sinks)

    def run(self) -> None:
        try:
            while self.sinks:
                try:
                    data = os.read(self.src, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.sinks = [fd for fd in self.sinks if write_all(fd, data) or close_fd(fd)]
        finally:
            for fd in self.sinks:
                close_fd(fd)


def close_fd(fd: int) -> bool:
    try:
        os.close(fd)
    except OSError:
        pass
    return False


class LabelPump(threading.Thread):
    """Copies one task stream to its destination, each line prefixed with the task's rank
    (``-l``). Lines go out whole, so that lines of different tasks never mix; with -u, bytes go
    out as they come (a label still starts each line)."""

    def __init__(self, src: int, dst: int, label: bytes, unbuffered: bool = False):
        super().__init__(daemon=True)
        self.src, self.dst, self.label, self.unbuffered = src, dst, label, unbuffered

    def run(self) -> None:
        pending = b""
        at_start = True
        try:
            while True:
                try:
                    data = os.read(self.src, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                if self.unbuffered:
                    out = bytearray()
                    for line in data.splitlines(keepends=True):
                        if at_start:
                            out += self.label
                        out += line
                        at_start = line.endswith(b"\n")
                    write_all(self.dst, bytes(out))
                    continue
                pending += data
                if b"\n" in pending:
                    head, _, pending = pending.rpartition(b"\n")
                    write_all(self.dst, b"".join(self.label + ln + b"\n" for ln in head.split(b"\n")))
            if pending:
                write_all(self.dst, self.label + pending)
        finally:
            close_fd(self.src)


def set_winsize(fd: int, winsize: Sequence[int] | None) -> None:
    if not winsize:
        return
    import struct
    import termios

    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", int(winsize[0]), int(winsize[1]), 0, 0))
    except OSError:
        pass


def get_winsize(fd: int) -> list[int] | None:
    import struct
    import termios

    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        return [rows, cols]
    except OSError:
        return None


class PtyRelay(threading.Thread):
    """--pty on a host reached through qrsh -inherit (which gives no terminal): task 0 runs on a
    new pseudo-terminal whose other end is relayed to the launcher's stdin and stdout, which qrsh
    connects to srun's terminal (srun puts it in raw mode)."""

    def __init__(self, master: int, src: int, dst: int):
        super().__init__(daemon=True)
        self.master, self.src, self.dst = master, src, dst

    def run(self) -> None:
        feeder = threading.Thread(target=self._feed, daemon=True)
        feeder.start()
        try:
            while True:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    break  # EIO: the task and every holder of the terminal are gone
                if not data:
                    break
                write_all(self.dst, data)
        finally:
            close_fd(self.master)

    def _feed(self) -> None:
        while True:
            try:
                data = os.read(self.src, 4096)
            except OSError:
                return
            if not data or not write_all(self.master, data):
                return


def isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def raw_mode(fd: int):
    import termios
    import tty

    try:
        old = termios.tcgetattr(fd)
        tty.setraw(fd)
        return old
    except termios.error:
        return None


def restore_tty(fd: int, old) -> None:
    import termios

    try:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
    except termios.error:
        pass
