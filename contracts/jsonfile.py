"""A user's JSON object file, read with one set of clear errors for every command that takes one.

read_json_object(path, what, expected) -> dict; ValueError naming the file (and the line of a
syntax error) when it is missing, a directory, not UTF-8, not JSON or not an object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json_object(path: str | Path, what: str = "JSON file", expected: str = "a JSON object") -> dict[str, Any]:
    """The JSON object in `path`. what: the file's role in messages ("parameter spec file");
    expected: what the top level must be, in messages."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: {what} is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: {what} is not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected {expected}, found a JSON {type(doc).__name__}")
    return doc


__all__ = ["read_json_object"]
