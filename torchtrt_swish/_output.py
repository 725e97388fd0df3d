"""The one output rule of the project: every file it writes is a regular file, written atomically.

The rule in full: docs/cli.md#output-files. Only the standard library: torchtrt_swish.doctor must use it on installs
where nothing else works.
"""
from __future__ import annotations

import contextlib
import os
import stat
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
_PERMISSIONS = 0o777  # setuid/setgid/sticky bits of a replaced file are not carried over to the new one


class OutputPathError(ValueError):
    """An output path that must not be written: neither a regular file nor a new path, or one of the inputs."""


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def output_target(path: str | os.PathLike) -> Path:
    """The file a write to `path` replaces: `path`, or the regular file a symlink there points to.

    OutputPathError for anything else: a folder, a device, a FIFO, a socket, or a symlink to one of them, to nothing
    or to itself. A link is written through, never replaced (os.replace on the link would swap it for a file).
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        if target is not path:
            raise OutputPathError(f"{path} is a symlink to {target}, which does not exist: not written through a "
                                  "dangling link") from None
        return path
    except OSError as exc:  # ELOOP for a link to itself, EACCES
        raise OutputPathError(f"{path} cannot be resolved ({exc.strerror or exc})") from None
    if (what := _not_regular(mode)) is not None:
        link = f" (a symlink to {target})" if target is not path else ""
        raise OutputPathError(f"{path}{link} is {what}: only a regular file or a new path is written")
    return target


def output_problem(path: str | os.PathLike) -> str | None:
    """Why a write to `path` would be refused (see output_target) or fail for its folder; None when it can go ahead."""
    try:
        target = output_target(path)
    except OutputPathError as exc:
        return str(exc)
    parent = target.parent
    if not parent.exists():
        return f"its folder {parent} does not exist"
    if not parent.is_dir():
        return f"{parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its folder {parent} is not writable"
    return None


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _check(paths: Sequence[Path], inputs: Sequence[Path]) -> list[Path]:
    targets = [output_target(p) for p in paths]
    protected = {k: p for p in inputs if (k := _file_key(p)) is not None}
    for path, target in zip(paths, targets):
        if (key := _file_key(target)) in protected:
            raise OutputPathError(f"{path} is the same file as the input {protected[key]}: refusing to overwrite it")
    if len({os.path.realpath(t) for t in targets}) != len(targets):
        raise OutputPathError(f"{', '.join(map(str, paths))}: one file named twice as an output")
    return targets


def _reserve(target: Path) -> Path:
    # O_EXCL: the name is ours alone; mode 0o666 before the umask, as open() gives a new file. The name is cut so
    # that a target name near the 255-byte limit still leaves room for the temporary's prefix and suffix.
    tmp = target.with_name(f".{target.name[:200]}.{uuid.uuid4().hex[:12]}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return tmp


def _settle(tmp: Path, target: Path) -> None:
    # Flushed before the rename, or a crash right after it could leave an empty file in the target's place.
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.chmod(tmp, os.stat(target).st_mode & _PERMISSIONS)  # a replaced file keeps who may read it
    except FileNotFoundError:
        pass


@contextlib.contextmanager
def atomic_outputs(paths: Iterable[str | os.PathLike], *, inputs: Iterable[str | os.PathLike] = ()
                   ) -> Iterator[list[Path]]:
    """Yield one empty temporary file beside each of `paths`; after the block they replace them, in that order.

    Each rename is atomic, the set is not: put files that others name (external data) before the file naming them.
    Nothing is replaced when the block raises; no temporary file is left in any case.
    """
    paths, inputs = [Path(p) for p in paths], [Path(p) for p in inputs]
    targets = _check(paths, inputs)
    tmps: list[Path] = []
    try:
        for target in targets:
            tmps.append(_reserve(target))
        yield list(tmps)
        # Again just before the swap: what stands at each path may have changed while the block wrote.
        targets = _check(paths, inputs)
        for tmp, target in zip(tmps, targets):
            _settle(tmp, target)
            os.replace(tmp, target)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, inputs: Iterable[str | os.PathLike] = ()) -> Iterator[Path]:
    """Yield an empty temporary file beside `path` to write by name; it replaces `path` only if the block succeeds."""
    with atomic_outputs([path], inputs=inputs) as (tmp,):
        yield tmp


def write_bytes(path: str | os.PathLike, data: bytes, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Write `data` to `path` atomically (see atomic_output); returns `path`."""
    with atomic_output(path, inputs=inputs) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Write `text` (UTF-8) to `path` atomically (see atomic_output); returns `path`."""
    with atomic_output(path, inputs=inputs) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _silence_stdout() -> None:
    # The reader of stdout is gone (`... | head`): later writes, and the interpreter's last flush, go to devnull
    # instead of raising BrokenPipeError (the recipe of Python's signal module documentation).
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (captured): nothing to redirect
        pass


def say(text: str, end: str = "\n") -> None:
    """Print `text` on stdout; a closed stdout is not an error (the command goes on and keeps its exit code)."""
    try:
        print(text, end=end, flush=True)
    except BrokenPipeError:
        _silence_stdout()


def flush_stdout() -> None:
    """Flush stdout (after argparse's --help or --version); a closed stdout is not an error."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def first_line(exc: BaseException, *, typed: bool = False) -> str:
    """The first line of an exception's text ('' when it has none): what a one-line error quotes; `typed`:
    'Type: line' (the bare type name for an empty text), how a report names an exception."""
    line = (str(exc).strip().splitlines() or [""])[0]
    if not typed:
        return line
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__
