"""Where a lake is: a local directory or an S3 prefix (`s3://bucket/prefix`).

    parse_location("lake")                -> LakeLocation(path=Path("lake"))
    parse_location("s3://twin/lake")      -> LakeLocation(bucket="twin", prefix="lake")
    parse_location("gs://b/x")            -> ValueError naming the scheme

A URI of any other scheme is refused by name, never taken as a relative path
(`Path('gs://b/x')` would be the local directory `gs:/b/x`). The S3 endpoint and credentials
come from the standard AWS environment and config files (catalog/object_store.py), so AWS,
MinIO and Ceph are reached alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_SCHEMES = ("s3",)
"""URI schemes a lake may have besides a plain local path."""

_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$")
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class LakeLocation:
    """A lake's place: `path` (a local directory) or `bucket` + `prefix` (object storage:
    keys `<prefix>/<relative path>`, no leading or trailing `/`; "" for the bucket's root)."""

    path: Path | None = None
    bucket: str | None = None
    prefix: str = ""

    @property
    def is_local(self) -> bool:
        return self.path is not None

    @property
    def uri(self) -> str:
        """`s3://bucket/prefix`, or the local path as text."""
        if self.is_local:
            return str(self.path)
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, relative: str) -> str:
        """The object key of a path relative to the lake root (`runs/robot=a/...`)."""
        relative = relative.lstrip("/")
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def __str__(self) -> str:
        return self.uri


def parse_location(text: str, source: str = "--lake") -> LakeLocation:
    """`text` as a lake location: `s3://bucket[/prefix]`, else a local path. Any other URI
    scheme, an `s3://` without a valid bucket name, or a prefix with `..` is refused with a
    ValueError naming `source` (the option or variable it came from) and the scheme."""
    m = _URI_RE.match(text)
    if m is None:
        return LakeLocation(path=Path(text))
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme not in SUPPORTED_SCHEMES:
        raise ValueError(
            f"{source} {text!r}: the {m.group(1)!r} scheme is not supported; a lake is a local "
            "directory or s3://bucket/prefix (S3, MinIO, Ceph: endpoint from the AWS environment)")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET_RE.match(bucket):
        raise ValueError(f"{source} {text!r}: {bucket!r} is not an S3 bucket name (3-63 of "
                         "lower-case letters, digits, '.', '-')")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ValueError(f"{source} {text!r}: the prefix {prefix!r} has an empty, '.' or '..' part")
    return LakeLocation(bucket=bucket, prefix=prefix)
