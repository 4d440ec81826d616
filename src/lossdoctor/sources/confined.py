"""Writing inside one directory and nowhere else: the run log's files, opened without following links.

A run directory may hold entries the monitor did not make: a symlink named `steps.jsonl` pointing
at a file elsewhere, an `incidents/` that is a link to another folder, a hard link to someone's
file. Opening such a path with `open()` would append to, or replace, a file outside the run
directory. Here every entry is opened relative to the descriptor of its directory (`dir_fd`),
with `O_NOFOLLOW` (a symlink as the last component is refused: `ELOOP`), sub-directories with
`O_DIRECTORY | O_NOFOLLOW`, temporary files with `O_EXCL` under a fresh name, and an opened file
must be a regular file with one link. So nothing the monitor writes can land outside the
directory it was given, whatever was planted in it. The directory the user named is opened as
given (a `runs -> /scratch/runs` link of their own is theirs to make).

A refused entry raises `Refused` (an OSError); the run log turns it into a note and goes on with
the other files.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class Refused(OSError):
    """A path inside the directory that is not a plain file or folder of its own (a symlink, a hard
    link, a FIFO, a device): nothing is written through it."""


def _refuse(where: str, why: str) -> Refused:
    return Refused(errno.EPERM, why, where)


class ConfinedDir:
    """A directory held open by its descriptor; files and folders below it are opened relative to
    it and never through a link."""

    def __init__(self, path: str | os.PathLike[str], fd: int) -> None:
        self.path = Path(path)
        self.fd = fd

    @classmethod
    def open_root(cls, path: str | os.PathLike[str]) -> ConfinedDir:
        """The directory the user named (created with its parents when missing)."""
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        return cls(p, os.open(p, os.O_RDONLY | _DIRECTORY | _CLOEXEC))

    def sub(self, name: str, create: bool = True) -> ConfinedDir:
        """The folder `name` inside this one (made when missing); Refused when it is a link or not
        a folder."""
        _check_name(name)
        if create:
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise _refuse(str(self.path / name), "a symlink or not a folder; nothing is written there") from e
            raise
        return ConfinedDir(self.path / name, fd)

    def lexists(self, name: str) -> bool:
        """Whether an entry `name` exists here (a link counts, dangling or not)."""
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            return True
        except OSError:
            return False

    def open_append(self, name: str) -> IO[bytes]:
        """`name` opened for appending (created when missing)."""
        _check_name(name)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        return os.fdopen(self._open_file(name, flags), "ab")

    def create_new(self, name: str) -> IO[bytes]:
        """A file that did not exist, opened for writing (`O_EXCL`: never one planted before)."""
        _check_name(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        return os.fdopen(self._open_file(name, flags), "wb")

    def replace(self, name: str, data: bytes) -> None:
        """`name` holds `data`, atomically: written to a fresh temporary name (`O_EXCL`), then
        renamed over `name` (a rename replaces a link itself, never its target)."""
        _check_name(name)
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        with self.create_new(tmp) as f:
            try:
                f.write(data)
            except BaseException:
                self.unlink(tmp)
                raise
        try:
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.unlink(tmp)
            raise

    def read_small(self, name: str, limit: int = 1 << 16) -> bytes | None:
        """The first `limit` bytes of the regular file `name` (no link followed), or None."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=self.fd)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read(limit)

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except OSError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def _open_file(self, name: str, flags: int) -> int:
        try:
            fd = os.open(name, flags, 0o666, dir_fd=self.fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR):
                raise _refuse(str(self.path / name), "a symlink or not a regular file; nothing is written to it") from e
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _refuse(str(self.path / name), "not a regular file; nothing is written to it")
            if st.st_nlink > 1:
                raise _refuse(str(self.path / name), "a hard link to another file; nothing is written to it")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _check_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise _refuse(name, "not a plain entry name")
