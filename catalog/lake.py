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
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .location import LakeLocation, parse_location

LAKE_ENV = "TWINLAKE_LAKE"
DEFAULT_LAKE = "lake"

INTERVALS_FILE = "intervals.parquet"
"""A run partition's stored default-rule intervals (catalog/stored_intervals.py): a cache
derived from frames.parquet and run.parquet, not a table of the lake (not in the file index)."""

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


S3_COMMANDS = ("every command with `--lake` but `catalog rebuild` and `demo` (`ingest`, `sql`, `intervals`, "
               "`catalog runs`, `fit run|list|show|export|compare|validate|report|quick`, `campaign run|list|show`, "
               "`sim replay`, `excite --design --for FIT`, `export bundle`, `import frankatwin`)")
"""The commands that take an s3:// lake, as an error names them."""


class ObjectStorageLake(ValueError):
    """The lake is on object storage (`s3://`) and the caller needs a local directory."""


def local_lake_path(text: str, source: str = "--lake") -> Path:
    """`text` as a local lake directory. An `s3://` URI raises `ObjectStorageLake` (this caller
    needs a directory; `open_lake` takes both); any other URI scheme is refused by name
    (`location.parse_location`), never taken as a relative path (`Path('gs://b/p')` is the
    local directory `gs:/b/p`). ValueError names `source` (the option or variable it came from)."""
    location = parse_location(text, source)
    if not location.is_local:
        raise ObjectStorageLake(
            f"{source} {text!r}: this command needs a local lake directory; an s3:// lake works with "
            f"{S3_COMMANDS} (docs/lake.md, \"Object storage\")")
    return location.path


def lake_location(path: str | Path | LakeLocation | None) -> LakeLocation:
    """Where the lake is: the `--lake` value, else `$TWINLAKE_LAKE`, else `./lake` (a local
    path made absolute, or an `s3://` location). Other URI schemes raise ValueError."""
    if isinstance(path, LakeLocation):
        return path if not path.is_local else LakeLocation(path=path.path.expanduser().absolute())
    if path is not None and str(path) != "":
        if not isinstance(path, str):
            return LakeLocation(path=Path(path).expanduser().absolute())
        location = parse_location(path, "--lake")
    else:
        env = os.environ.get(LAKE_ENV, "")
        location = parse_location(env, f"${LAKE_ENV}") if env else LakeLocation(path=Path(DEFAULT_LAKE))
    if location.is_local:
        return LakeLocation(path=location.path.expanduser().absolute())
    return location


def resolve_lake(path: str | Path | LakeLocation | None) -> Path:
    """The lake root directory: the `--lake` value, else `$TWINLAKE_LAKE`, else `./lake` (not
    created here). An `s3://` lake raises `ObjectStorageLake` (use `open_lake`), another URI
    scheme a ValueError naming it."""
    location = lake_location(path)
    if not location.is_local:
        raise ObjectStorageLake(
            f"lake {location.uri}: this command needs a local lake directory; an s3:// lake works "
            f"with {S3_COMMANDS} (docs/lake.md, \"Object storage\")")
    return location.path


def open_lake(path: str | Path | LakeLocation | None) -> "Lake":
    """The `Lake` of a `--lake` value (as `lake_location`): local, or on object storage with a
    private local scratch directory as its `root` (staging, spill; never read by a view)."""
    location = lake_location(path)
    if location.is_local:
        return Lake(location.path)
    scratch = Path(tempfile.gettempdir()) / f"twinlake-{os.getuid()}" / location.bucket / (location.prefix or "_")
    return Lake(scratch, location)


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
    """Paths of one lake rooted at `root` (nothing is created on construction). With a
    `location` on object storage (`open_lake("s3://...")`), `root` is a local scratch
    directory (staging, quarantine before upload) and the partitions live in the bucket
    (catalog/object_publish.py)."""

    root: Path
    location: LakeLocation | None = None

    @property
    def remote(self) -> bool:
        """True when the lake is on object storage."""
        return self.location is not None and not self.location.is_local

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())

    def shown(self, relative: str | Path) -> Path | str:
        """A partition as a user should see it: its directory, or its URI on object storage."""
        if self.remote:
            return f"{self.location.uri}/{Path(relative).as_posix()}"
        return self.root / relative

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
