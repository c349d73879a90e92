"""One cache locator for every numba kernel of ours cached on disk (`@njit(cache=True)`).

numba stamps a cached kernel with a hash of its own source file only. A kernel also compiles in
the module-level constants and functions it reads from the modules it imports (sim/fr3.py's
joint limits and gains, kernels/tick.py's laws inlined by the control callback): edit one of
those, and numba would load the stale machine code. `register()` puts a locator in front of
numba's own that stamps a kernel of ours with the digest of its file and of every module of
ours it imports, transitively (read with `ast`, nothing imported), so any edit to a source a
kernel may inline compiles it afresh; where the cache lives stays numba's choice
(`NUMBA_CACHE_DIR`, the package's `__pycache__`, or the user-wide cache, in numba's order).
Kernels of other packages keep numba's locators.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

PACKAGES = ("twinlake",)
"""Kernels of modules under these top-level packages are stamped with their sources' digest."""


def _module_file(name: str) -> Path | None:
    """The source file of module `name` (absolute), without running it; None if not ours or not found."""
    if name.split(".")[0] not in PACKAGES:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _relative_file(path: Path, level: int, dotted: str) -> list[Path]:
    """Candidate files of `from <level dots><dotted> import ...` written in `path`."""
    base = path.parent
    for _ in range(level - 1):
        base = base.parent
    target = base.joinpath(*dotted.split(".")) if dotted else base
    return [target.with_suffix(".py"), target / "__init__.py"]


def _imports(path: Path) -> set[Path]:
    """The files of ours `path` imports anywhere in it (module and `from` imports, names that
    are submodules included)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            module = node.module or ""
            candidates = _relative_file(path, node.level, module)
            for alias in node.names:
                candidates += _relative_file(path, node.level, f"{module}.{alias.name}".strip("."))
            found.update(c for c in candidates if c.is_file())
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom):
                names += [f"{node.module}.{a.name}" for a in node.names]
            found.update(f for f in map(_module_file, names) if f is not None)
    return {f.resolve() for f in found}


@lru_cache(maxsize=None)
def source_closure(path: Path) -> tuple[Path, ...]:
    """`path` and every source file of ours it imports, transitively, sorted."""
    seen, todo = set(), [Path(path).resolve()]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(_imports(current) - seen)
    return tuple(sorted(seen))


def sources_digest(path: str | Path) -> str:
    """SHA-256 over the contents of `source_closure(path)` (hex)."""
    hasher = hashlib.sha256()
    for file in source_closure(Path(path).resolve()):
        hasher.update(file.read_bytes())
    return hasher.hexdigest()


def _stamped(locator: type) -> type:
    """`locator` (a numba cache locator class) for our kernels only, stamped with the digest."""

    class Stamped(locator):
        def get_source_stamp(self):
            return sources_digest(self._py_file)

        @classmethod
        def from_function(cls, py_func, py_file):
            if (py_func.__module__ or "").split(".")[0] not in PACKAGES:
                return None
            return super().from_function(py_func, py_file)

    Stamped.__name__ = Stamped.__qualname__ = f"SourcesDigest{locator.__name__}"
    return Stamped


def register() -> None:
    """Put the stamped locators in front of numba's (once per process; call before the kernels'
    modules are imported, since numba picks a kernel's locator when it is decorated)."""
    from numba.core import caching

    classes = caching.CacheImpl._locator_classes
    if any(getattr(c, "__name__", "").startswith("SourcesDigest") for c in classes):
        return
    ours = [_stamped(c) for c in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                                  caching.UserWideCacheLocator)]
    classes[:0] = ours


__all__ = ["PACKAGES", "register", "source_closure", "sources_digest"]
