"""Lazy public faces (PEP 562) for the packages: import a name's module on first use.

Every command imports the folders' code it runs when it runs (`twinlake --help` imports none of
sim, daemon and fit). A package whose public face imported all its modules at once would make a
command that needs one of them pay for MuJoCo, numba, cma and scipy: measured on the 2-core dev
machine, a fresh interpreter imports `twinlake.sim.arm_model.params` in 0.10 s and all of sim in 0.47 s,
`twinlake.daemon.client` (`twinlake record`) in 0.14 s and all of daemon in 0.52 s,
`twinlake.fit.records.record` (`fit list`, `fit show`) in 0.24 s and all of fit in 1.3 s.
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
