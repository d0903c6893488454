"""The node's optional spool directory (SPOOL_DIR): fetched chunks kept on disk until the batch
holding them is accepted, so a node restarted mid-range does not fetch them again.

One file per chunk, ``<dir>/<group>/<first>-<last>-<bytes>.over``, holding the chunk's raw
CRLF-terminated overview lines. A file is written under a temporary name and renamed, and its
size is in its name, so a file cut short (crash, full disk) is never read as a whole chunk. The
directory stays under its size cap: the oldest files go first, and a chunk that does not fit is
just not kept. The spool only saves work: any failure to use it is a fetch from the server.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

SUFFIX = ".over"


class LocalSpool:
    def __init__(self, directory: str, max_bytes: int):
        self.root = Path(directory)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        for leftover in self.root.glob(f"*/*{SUFFIX}.tmp*"):
            leftover.unlink(missing_ok=True)
        self._size = sum(path.stat().st_size for path in self._files())

    @property
    def size(self) -> int:
        return self._size

    def load(self, group: str, first: int, last: int) -> bytes | None:
        """The chunk's lines if they are kept whole, else None."""
        directory = self._group_dir(group)
        if directory is None:
            return None
        for path in directory.glob(f"{first}-{last}-*{SUFFIX}"):
            expected = _size_in_name(path)
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if len(data) == expected:
                return data
        return None

    def store(self, group: str, first: int, last: int, blocks: Iterable[bytes]) -> bool:
        """Keep the chunk (its lines in blocks); False when it was not kept (no room, disk error)."""
        directory = self._group_dir(group)
        blocks = list(blocks)
        size = sum(map(len, blocks))
        if directory is None or size > self.max_bytes:
            return False
        if not self._make_room(size):
            return False
        path = directory / f"{first}-{last}-{size}{SUFFIX}"
        temporary = path.with_name(f"{path.name}.tmp{threading.get_ident()}")
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as out:
                out.writelines(blocks)
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)
            with self._lock:
                self._size -= size
            return False
        return True

    def discard(self, group: str, first: int, last: int) -> None:
        """Forget every chunk inside [first, last] (its batch was accepted, or the range is gone)."""
        directory = self._group_dir(group)
        if directory is None or not directory.is_dir():
            return
        for path in directory.glob(f"*{SUFFIX}"):
            span = _span_in_name(path)
            if span is not None and first <= span[0] and span[1] <= last:
                self._remove(path)

    # -- plumbing --------------------------------------------------------------------------

    def _group_dir(self, group: str) -> Path | None:
        name = quote(group, safe="")  # a group name never holds "/", but the coordinator's word is not proof
        return None if not name or name.startswith(".") else self.root / name

    def _files(self) -> list[Path]:
        return list(self.root.glob(f"*/*{SUFFIX}"))

    def _make_room(self, size: int) -> bool:
        """Reserves `size` bytes, removing the oldest chunks if needed."""
        with self._lock:
            if self._size + size > self.max_bytes:
                for path in sorted(self._files(), key=_mtime):
                    if self._size + size <= self.max_bytes:
                        break
                    self._remove_locked(path)
            if self._size + size > self.max_bytes:
                return False
            self._size += size
            return True

    def _remove(self, path: Path) -> None:
        with self._lock:
            self._remove_locked(path)

    def _remove_locked(self, path: Path) -> None:
        try:
            size = path.stat().st_size
            path.unlink()
        except OSError:
            return
        self._size -= size


def _span_in_name(path: Path) -> tuple[int, int] | None:
    parts = path.name[: -len(SUFFIX)].split("-")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _size_in_name(path: Path) -> int:
    try:
        return int(path.name[: -len(SUFFIX)].split("-")[2])
    except (IndexError, ValueError):
        return -1


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
