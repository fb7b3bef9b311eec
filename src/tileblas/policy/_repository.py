"""The model repository: one SQLite file holding submodels keyed by machine, library, threads, device, locality.

Design note
    Path: the ``path`` argument, else ``$TILEBLAS_MODEL_DB``, else ``$XDG_CACHE_HOME/tileblas/models.sqlite``
    (``~/.cache/tileblas/models.sqlite``).  Every operation opens its own connection (so threads and
    processes never share one), in WAL mode with a busy timeout; writes run in ``BEGIN IMMEDIATE``
    transactions, so concurrent writers serialise and readers never see half a model.

    Readers.  ``Repository(path, read_only=True)`` (what the runtime's model lookups, ``tileblas model
    show`` and ``rank`` without ``--build`` open) never creates the file or its tables and never writes:
    an empty file, or one that is not a tileblas repository, is an error that leaves it as it is.  The
    runtime's lookups wait :data:`READ_TIMEOUT` for a lock, not the writers' 30 s: a repository locked by
    another process is :class:`RepositoryBusyError`, and the lookup falls back to the shipped heuristics.

    Schema versioning: a ``meta`` table holds ``schema_version``.  A file written by a newer tileblas (or
    a database that is not a tileblas repository, or bytes that are not SQLite at all) raises
    :class:`RepositoryError` naming the path and what is wrong.  Each model body is JSON with a SHA-256
    checksum that is verified on load, so a damaged row is an error, never a wrong model.

What it must not touch
    Model fitting and timing.  It stores what it is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from tileblas.policy._models import Submodel
from tileblas.policy._paths import default_path

__all__ = ["Repository", "RepositoryError", "ReadOnlyRepositoryError", "RepositoryBusyError", "ModelKey",
           "current_key", "default_path", "SCHEMA_VERSION", "READ_TIMEOUT"]

SCHEMA_VERSION = 1
#: Seconds a reader that has a fallback (the runtime's model lookups) waits for another process's lock.
READ_TIMEOUT = 0.2
_APP = "tileblas-models"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (
    machine TEXT NOT NULL, library TEXT NOT NULL, version TEXT NOT NULL, threads INTEGER NOT NULL,
    device TEXT NOT NULL, locality TEXT NOT NULL, routine TEXT NOT NULL, flags TEXT NOT NULL,
    created REAL NOT NULL, samples INTEGER NOT NULL, avg_error REAL, max_error REAL,
    body TEXT NOT NULL, checksum TEXT NOT NULL,
    PRIMARY KEY (machine, library, version, threads, device, locality, routine, flags)
);
CREATE TABLE IF NOT EXISTS properties (
    machine TEXT NOT NULL, library TEXT NOT NULL, version TEXT NOT NULL, threads INTEGER NOT NULL,
    device TEXT NOT NULL, locality TEXT NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (machine, library, version, threads, device, locality, name)
);
"""


class RepositoryError(RuntimeError):
    """The model repository file cannot be used: damaged, not a tileblas repository, or too new."""


class ReadOnlyRepositoryError(RepositoryError, PermissionError):
    """A write (store, delete, create) to a model repository that this process may only read."""


class RepositoryBusyError(RepositoryError):
    """The model repository stayed locked by another connection or process for the whole busy timeout."""


def _is_busy_error(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _writable(path: Path) -> bool:
    """True when this process may write ``path`` and create its journal files (``-wal``, ``-shm``) beside it."""
    d = path.parent
    return os.access(path, os.W_OK) and os.access(d, os.W_OK | os.X_OK)


def _is_readonly_error(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("readonly" in msg or "read-only" in msg)


@dataclass(frozen=True)
class ModelKey:
    """Where a model is valid: machine, BLAS library and version, thread count, device, memory locality."""

    machine: str
    library: str
    version: str
    threads: int
    device: str = "cpu"
    locality: str = "in-cache"

    def as_tuple(self) -> tuple[str, str, str, int, str, str]:
        return (self.machine, self.library, self.version, self.threads, self.device, self.locality)


def current_key(threads: int = 1, locality: str = "in-cache", device: str = "cpu") -> ModelKey:
    """The :class:`ModelKey` of this machine with tileblas' own OpenBLAS on ``threads`` threads."""
    from tileblas.kernels import _openblas

    lib = _openblas.get_library(threads)
    try:
        from importlib.metadata import version

        ver = version("scipy-openblas32")
    except Exception:  # pragma: no cover - metadata missing
        ver = lib.config().split()[1] if lib.config().split() else "unknown"
    machine = f"{platform.node()}/{platform.machine()}/{lib.corename()}/{os.cpu_count()}cpu"
    return ModelKey(machine, "openblas", ver, int(threads), device, locality)


def _flags_text(flags: tuple[str, ...] | list[str] | str) -> str:
    return "".join(flags)


class Repository:
    """A SQLite file of performance models.

    Parameters
    ----------
    path : str or Path, optional
        The file; default :func:`default_path`.
    create : bool
        Create the file (and its directory) if missing.  With ``create=False`` a missing file raises
        :class:`FileNotFoundError`.
    timeout : float
        Seconds a connection waits for another's lock (then :class:`RepositoryBusyError`).
    read_only : bool
        Open for reading only: never create the file or its tables, never write (stores raise
        :class:`ReadOnlyRepositoryError`); a file that is not a tileblas repository is left as it is.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, create: bool = True, timeout: float = 30.0,
                 read_only: bool = False) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.timeout = float(timeout)
        if self.path.is_dir():
            raise RepositoryError(f"the model repository path {self.path} is a directory, not a file")
        if not self.path.exists():
            if not create or read_only:
                raise FileNotFoundError(f"no model repository at {self.path}")
            self._make_parent()
        if read_only and not self.path.is_file():
            raise RepositoryError(f"{self.path} is not a regular file, not a tileblas model repository")
        self._reader = bool(read_only)
        #: True when the file can be read but not written (opened ``read_only``, or permissions): loads
        #: work, stores raise :class:`ReadOnlyRepositoryError`.
        self.read_only = self._reader or (self.path.exists() and not _writable(self.path))
        self._immutable: bool | None = None
        if self._reader and self.path.stat().st_size == 0:
            raise RepositoryError(f"{self.path} is an empty file, not a tileblas model repository (left as it is)")
        self._init()

    def _make_parent(self) -> None:
        parent = self.path.parent
        for p in (parent, *parent.parents):
            if p.exists() and not p.is_dir():
                raise RepositoryError(
                    f"cannot create the model repository {self.path}: {p} is a file, not a directory; "
                    "pass another path or set TILEBLAS_MODEL_DB")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except PermissionError as exc:
            raise ReadOnlyRepositoryError(
                f"cannot create the model repository {self.path}: no permission to create {parent} "
                f"({exc.strerror}); pass another path or set TILEBLAS_MODEL_DB") from exc
        except OSError as exc:
            raise RepositoryError(f"cannot create the model repository {self.path}: {exc}") from exc
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ReadOnlyRepositoryError(
                f"cannot create the model repository {self.path}: the directory {parent} is read-only; "
                "pass another path or set TILEBLAS_MODEL_DB")

    def _ro_uri(self) -> str:
        """URI opening the file read-only.  Where SQLite cannot make its shared-memory file beside a WAL
        database (read-only directory), the file is opened as immutable: nothing can write it then."""
        base = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
        if self._immutable is None:
            immutable = False
            try:
                con = sqlite3.connect(base, uri=True, timeout=self.timeout)
                try:
                    con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                finally:
                    con.close()
            except sqlite3.OperationalError as exc:
                if _is_busy_error(exc):  # locked by another process: not a read-only directory; ask again later
                    raise self._busy_error(exc) from exc
                immutable = not os.access(self.path.parent, os.W_OK)  # no -shm can be made beside it
                if not immutable:
                    raise RepositoryError(f"cannot open the model repository {self.path}: {exc}") from exc
            except sqlite3.DatabaseError as exc:
                raise self._damaged_error(exc) from exc
            self._immutable = immutable
        return base + "&immutable=1" if self._immutable else base

    def _damaged_error(self, exc: BaseException) -> RepositoryError:
        if self._reader:  # maybe a file of the user's: no advice to delete it
            return RepositoryError(f"{self.path} is damaged or not an SQLite file ({exc}): not a tileblas model "
                                   "repository (left as it is)")
        return RepositoryError(f"the model repository {self.path} is damaged or not an SQLite file ({exc}); "
                               "delete it or point TILEBLAS_MODEL_DB elsewhere")

    def _busy_error(self, exc: BaseException) -> RepositoryBusyError:
        return RepositoryBusyError(
            f"the model repository {self.path} is locked by another process (waited {self.timeout:g} s: {exc}); "
            "try again when it is done")

    def _read_only_error(self, what: str = "store models in it") -> ReadOnlyRepositoryError:
        return ReadOnlyRepositoryError(
            f"the model repository {self.path} is read-only for this process (file or directory permissions): "
            f"its models can be read, but not written; to {what}, make it writable or point "
            "TILEBLAS_MODEL_DB at a writable file")

    # ------------------------------------------------------------------ connection and schema
    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            if getattr(self, "_reader", False) and _writable(self.path):
                # opened to read a file this process may write: a read-write connection that only reads
                # (mode=rw never creates the file), so that its close removes the -wal and -shm files a
                # read-only connection to a WAL database would leave behind
                uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=rw"
                con = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
            elif getattr(self, "read_only", False):
                con = sqlite3.connect(self._ro_uri(), uri=True, timeout=self.timeout, isolation_level=None)
            else:
                con = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise RepositoryError(f"cannot open the model repository {self.path}: {exc}") from exc
        try:
            con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            yield con
        except sqlite3.DatabaseError as exc:
            if _is_busy_error(exc):
                raise self._busy_error(exc) from exc
            if _is_readonly_error(exc):
                raise self._read_only_error() from exc
            raise self._damaged_error(exc) from exc
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise self._read_only_error()
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _init(self) -> None:
        with self._connect() as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "meta" not in tables:
                raise RepositoryError(f"{self.path} is an SQLite database but not a tileblas model repository")
            if "meta" in tables:
                self._check_version(con)
                if tables >= {"meta", "models", "properties"}:
                    return
            if self._reader:
                raise RepositoryError(f"{self.path} is an SQLite database without the tables of a tileblas "
                                      "model repository: not a tileblas model repository (left as it is)")
            if self.read_only:
                raise self._read_only_error("create its tables")
            con.execute("PRAGMA journal_mode=WAL").fetchone()
        with self._write() as con:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    con.execute(stmt)
            row = con.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                con.execute("INSERT INTO meta VALUES ('application', ?)", (_APP,))
            else:
                self._check_version(con)

    def _check_version(self, con: sqlite3.Connection) -> None:
        rows = dict(con.execute("SELECT name, value FROM meta").fetchall())
        if rows.get("application", _APP) != _APP:
            raise RepositoryError(f"{self.path} is not a tileblas model repository")
        raw = rows.get("schema_version")
        if raw is None:
            return
        try:
            ver = int(raw)
        except ValueError:
            raise RepositoryError(f"{self.path} has an unreadable schema version {raw!r}") from None
        if ver > SCHEMA_VERSION:
            raise RepositoryError(
                f"{self.path} uses model repository schema version {ver}, written by a newer tileblas; "
                f"this tileblas reads version {SCHEMA_VERSION}"
            )
        if ver < 1:
            raise RepositoryError(f"{self.path} has an invalid schema version {ver}")

    # ------------------------------------------------------------------ models
    def save(self, key: ModelKey, submodel: Submodel) -> None:
        """Store (replace) the submodel of ``submodel.routine`` / ``submodel.flags`` under ``key``."""
        body = json.dumps(submodel.to_dict(), sort_keys=True)
        digest = hashlib.sha256(body.encode()).hexdigest()
        with self._write() as con:
            con.execute(
                "INSERT OR REPLACE INTO models VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (*key.as_tuple(), submodel.routine, _flags_text(submodel.flags), time.time(), submodel.samples,
                 submodel.validation.get("avg_rel_error"), submodel.validation.get("max_rel_error"), body, digest),
            )

    def load(self, key: ModelKey, routine: str, flags: tuple[str, ...] | str) -> Submodel | None:
        """The stored submodel, or None when none is stored for this key, routine and flags."""
        with self._connect() as con:
            row = con.execute(
                "SELECT body, checksum FROM models WHERE machine=? AND library=? AND version=? AND threads=? "
                "AND device=? AND locality=? AND routine=? AND flags=?",
                (*key.as_tuple(), routine, _flags_text(flags)),
            ).fetchone()
        if row is None:
            return None
        return self._decode(row[0], row[1], routine, flags)

    def _decode(self, body: Any, checksum: Any, routine: str, flags: Any) -> Submodel:
        if not isinstance(body, str) or hashlib.sha256(body.encode()).hexdigest() != checksum:
            raise RepositoryError(f"the stored model {routine} {_flags_text(flags)} in {self.path} is damaged "
                                  f"(checksum mismatch); rebuild it with `tileblas model build`")
        try:
            return Submodel.from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError) as exc:
            raise RepositoryError(f"the stored model {routine} in {self.path} cannot be read: {exc}") from exc

    def list(self, key: ModelKey | None = None) -> list[dict[str, Any]]:
        """Summaries of the stored models (all keys, or one)."""
        sql = ("SELECT machine, library, version, threads, device, locality, routine, flags, created, samples, "
               "avg_error, max_error FROM models")
        args: tuple = ()
        if key is not None:
            sql += " WHERE machine=? AND library=? AND version=? AND threads=? AND device=? AND locality=?"
            args = key.as_tuple()
        with self._connect() as con:
            rows = con.execute(sql + " ORDER BY routine, flags, threads, locality", args).fetchall()
        names = ("machine", "library", "version", "threads", "device", "locality", "routine", "flags", "created",
                 "samples", "avg_error", "max_error")
        return [dict(zip(names, r)) for r in rows]

    def delete(self, key: ModelKey, routine: str, flags: tuple[str, ...] | str) -> bool:
        """Remove one model; True if it existed."""
        with self._write() as con:
            cur = con.execute(
                "DELETE FROM models WHERE machine=? AND library=? AND version=? AND threads=? AND device=? "
                "AND locality=? AND routine=? AND flags=?", (*key.as_tuple(), routine, _flags_text(flags)))
            return cur.rowcount > 0

    # ------------------------------------------------------------------ properties (peak rate, ...)
    def set_property(self, key: ModelKey, name: str, value: float) -> None:
        """Store a number measured for ``key`` (e.g. ``"peak_gflops"``)."""
        with self._write() as con:
            con.execute("INSERT OR REPLACE INTO properties VALUES (?,?,?,?,?,?,?,?)",
                        (*key.as_tuple(), name, float(value)))

    def get_property(self, key: ModelKey, name: str) -> float | None:
        """A stored number, or None."""
        with self._connect() as con:
            row = con.execute(
                "SELECT value FROM properties WHERE machine=? AND library=? AND version=? AND threads=? "
                "AND device=? AND locality=? AND name=?", (*key.as_tuple(), name)).fetchone()
        return None if row is None else float(row[0])

    def stamp(self) -> tuple[int, int]:
        """A cheap change stamp (modification times of the file and its WAL) for caches."""
        def mt(p: Path) -> int:
            try:
                return p.stat().st_mtime_ns
            except OSError:
                return 0
        return mt(self.path), mt(Path(str(self.path) + "-wal"))

    def __repr__(self) -> str:
        return f"Repository({str(self.path)!r})"
