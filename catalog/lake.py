"""Lake layout on disk: where the lake is, and where each partition lives.

The lake is plain Hive-partitioned Parquet (see docs/lake.md)::

    <lake>/runs/robot=<robot>/run=<run>/   frames.parquet, targets.parquet?, run.parquet, raw/,
                                           intervals.parquet? (stored intervals, a cache)
    <lake>/fits/fit=<fit_id>/              fit.parquet, history.parquet, runs.parquet, ...
    <lake>/validations/ ...
    <lake>/_staging/   <lake>/_quarantine/
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

LAKE_ENV = "TWINLAKE_LAKE"
DEFAULT_LAKE = "lake"

INTERVALS_FILE = "intervals.parquet"
"""A run partition's stored default-rule intervals (catalog/stored_intervals.py): a cache
derived from frames.parquet and run.parquet, not a table of the lake (not in the file index)."""

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def local_lake_path(text: str, source: str = "--lake") -> Path:
    """`text` as a local lake directory; a URI (`s3://bucket/prefix`, `gs://…`, `file://…`) is
    refused by its scheme, never taken as a relative path (`Path('s3://b/p')` is the local
    directory `s3:/b/p`). ValueError names `source` (the option or variable it came from)."""
    m = _URI_RE.match(text)
    if m:
        raise ValueError(
            f"{source} {text!r}: the lake must be a local directory; the {m.group(1)!r} scheme is not "
            "supported (object storage is not supported yet: give a directory path)")
    return Path(text)


def resolve_lake(path: str | Path | None) -> Path:
    """The lake root: the `--lake` value, else `$TWINLAKE_LAKE`, else `./lake` (not created here).
    A URI in `$TWINLAKE_LAKE` (or passed as a string) is refused (`local_lake_path`)."""
    if path is not None and str(path) != "":
        lake = local_lake_path(path, "--lake") if isinstance(path, str) else Path(path)
        return lake.expanduser().absolute()
    env = os.environ.get(LAKE_ENV, "")
    if env:
        return local_lake_path(env, f"${LAKE_ENV}").expanduser().absolute()
    return Path(DEFAULT_LAKE).absolute()


def check_id(kind: str, value: str) -> str:
    """Return `value` if it is a safe partition id (1-128 of `[A-Za-z0-9_.-]`, not starting
    with `.`, `-` or `_`); raise ValueError naming `kind` otherwise."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise ValueError(
            f"{kind} id {value!r} is not valid: expected 1-128 characters of letters, digits, "
            "'_', '.', '-', starting with a letter or digit"
        )
    return value


@dataclass(frozen=True)
class Lake:
    """Paths of one lake rooted at `root` (nothing is created on construction)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, robot: str, run: str) -> Path:
        """`<lake>/runs/robot=<robot>/run=<run>` (ids checked, never path-joined raw)."""
        return self.runs_dir / f"robot={check_id('robot', robot)}" / f"run={check_id('run', run)}"

    def run_relative(self, robot: str, run: str) -> Path:
        """The run partition relative to the lake root (for `publish_partition`)."""
        return self.run_dir(robot, run).relative_to(self.root)

    @property
    def fits_dir(self) -> Path:
        return self.root / "fits"

    def fit_dir(self, fit_id: str) -> Path:
        """`<lake>/fits/fit=<fit_id>`."""
        return self.fits_dir / f"fit={check_id('fit', fit_id)}"

    @property
    def validations_dir(self) -> Path:
        return self.root / "validations"

    @property
    def staging_dir(self) -> Path:
        return self.root / "_staging"

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "_quarantine"


def sha256_file(path: str | Path, chunk_bytes: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes, read in 4 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()
