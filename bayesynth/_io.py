"""Atomic file output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_dir", "atomic_write_text"]


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and move the result onto ``path`` in one rename.

    A reader never sees a half-written file, and a failure leaves any earlier file untouched.

    Parameters
    ----------
    path : path-like
        Final destination.
    writer : callable
        Writes the complete content to the temporary path it is given.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        writer(tmp_path)
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically.

    Parameters
    ----------
    path : path-like
        Final destination; missing parent directories are created.
    text : str
        The complete content of the file.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    return atomic_write(path, lambda p: p.write_text(text))


def atomic_write_dir(path: str | os.PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_dir)`` to fill a fresh directory, then move it onto ``path``.

    An existing directory at ``path`` is replaced only after the new one is complete.

    Parameters
    ----------
    path : path-like
        Final destination; must not be an existing file.
    writer : callable
        Writes the complete content into the temporary directory it is given.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and is not a directory.
    """
    import shutil

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"'{path}' exists and is not a directory.")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    old: Path | None = None
    try:
        writer(tmp)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            old.rmdir()
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists():
            shutil.rmtree(old, ignore_errors=True)
    return path
