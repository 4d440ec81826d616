"""The command's console, copied as it goes: to this process's own stdout/stderr and to a file.

`lossdoctor run` hooks torch inside the training process. Where nothing can be hooked (another
framework, a compiled binary, a process that never imports torch), what the command printed is
the only evidence, so it is kept: every byte the child writes is passed on unchanged and appended
to `console.log` in the run directory. A stream that is a terminal here is given to the child as
a pseudo-terminal of the same size, so progress bars, colours and line buffering behave as they
would without lossdoctor; a redirected stream gets a pipe, as it would have. Nothing is read from
the file back into the child, and the copy never blocks the child for longer than a write here.

Torch-free (this runs in the `lossdoctor run` process).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: bytes copied per read: large enough that a chatty child costs few system calls
CHUNK = 64 * 1024
#: the copy keeps at most this much of the console on disk (a runaway printer must not fill it);
#: past it the file gets one line saying so and the bytes still reach the terminal
MAX_COPY_BYTES = 512 << 20
CONSOLE_FILE = "console.log"


@dataclass
class Tee:
    """The child's ends (`child_fds` for Popen's stdout/stderr) and the threads that copy ours."""

    log_path: Path
    child_fds: dict[str, int] = field(default_factory=dict)
    _parent_fds: list[tuple[int, IO[bytes]]] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _written: int = 0
    _made_dir: bool = False
    _file: IO[bytes] | None = None

    def start(self) -> None:
        self._made_dir = not self.log_path.parent.exists()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.log_path, "ab")
        for name, out in (("stdout", sys.stdout), ("stderr", sys.stderr)):
            read_end, write_end = _stream_pair(out)
            self.child_fds[name] = write_end
            self._parent_fds.append((read_end, _binary(out)))

    def after_spawn(self) -> None:
        """The child holds its ends now: close ours (so EOF arrives when it exits) and copy."""
        for fd in self.child_fds.values():
            os.close(fd)
        for read_end, out in self._parent_fds:
            t = threading.Thread(target=self._copy, args=(read_end, out), daemon=True)
            t.start()
            self._threads.append(t)

    def finish(self, timeout: float = 5.0) -> None:
        """Wait for the copies to drain (a grandchild still holding the stream is not waited for
        past `timeout`), then close the file."""
        for t in self._threads:
            t.join(timeout)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if self._written == 0:  # the command printed nothing: leave no empty file behind
            try:
                self.log_path.unlink()
                if self._made_dir:  # ... nor an empty run directory it made for the copy
                    self.log_path.parent.rmdir()
            except OSError:
                pass

    def _copy(self, fd: int, out: IO[bytes]) -> None:
        try:
            while True:
                try:
                    data = os.read(fd, CHUNK)
                except OSError:  # a pseudo-terminal whose child side closed reads as EIO
                    break
                if not data:
                    break
                _write_out(out, data)
                self._keep(data)
        finally:
            os.close(fd)

    def _keep(self, data: bytes) -> None:
        with self._lock:
            if self._file is None:
                return
            room = MAX_COPY_BYTES - self._written
            self._written += len(data)
            try:
                if len(data) <= room:
                    self._file.write(data)
                else:  # the limit: what fits, one line saying so, and no more copying
                    self._file.write(data[:room])
                    self._file.write(b"\n[lossdoctor: console copy stopped at its size limit]\n")
                    self._file.close()
                    self._file = None
                    return
                self._file.flush()
            except OSError:  # a full disk stops the copy, never the child's output
                self._file = None


def _binary(stream: IO[str]) -> IO[bytes]:
    buffer = getattr(stream, "buffer", None)
    return buffer if buffer is not None else os.fdopen(os.dup(stream.fileno()), "wb")


def _write_out(out: IO[bytes], data: bytes) -> None:
    try:
        out.write(data)
        out.flush()
    except (OSError, ValueError):  # our own stdout closed (a pipe's reader left): the copy goes on
        pass


def _stream_pair(stream: IO[str]) -> tuple[int, int]:
    """(our read end, the child's write end): a pseudo-terminal of the terminal's size where
    `stream` is a terminal, else a pipe."""
    try:
        fd = stream.fileno()
        tty = os.isatty(fd)
    except (OSError, ValueError, AttributeError):
        tty = False
    if tty and sys.platform != "win32":
        import pty

        master, slave = pty.openpty()
        _copy_size(fd, slave)
        _raw_output(slave)
        return master, slave
    return os.pipe()


def _raw_output(fd: int) -> None:
    """No newline translation on the child's side: the bytes reach our terminal, which does its
    own, and the file as the child wrote them."""
    try:
        import termios

        attrs = termios.tcgetattr(fd)
        attrs[1] &= ~termios.ONLCR
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except (OSError, ImportError):
        pass


def _copy_size(from_fd: int, to_fd: int) -> None:
    try:
        import fcntl
        import termios

        size = fcntl.ioctl(from_fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(to_fd, termios.TIOCSWINSZ, size)
    except OSError:
        pass
