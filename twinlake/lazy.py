"""Lazy public faces (PEP 562) for the sub-packages: import a name's module on first use.

`twinlake --help` composes every folder's CLI; a package whose public names pulled in MuJoCo,
numba, cma or scipy at import would make every command pay for them.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, namespace: dict[str, Any], modules: dict[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`(__getattr__, __dir__, names)` for `package`, whose public names live in its submodules.

    modules: submodule (relative to `package`) → the names it provides; namespace: the
    package's `globals()`, where each name is cached once imported.
    """
    where = {name: module for module, names in modules.items() for name in names}

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(where))

    return getattr_, dir_, sorted(where)
