"""twinlake.contracts: the ground floor every folder may use; it imports nothing of ours.

What more than one folder must agree on and no folder owns: the fr3_stack CSV v2 columns the
daemon writes and ingest reads (`csv_v2`), a user's JSON object file read with one set of
errors (`read_json_object`), the lazy public faces of the packages (`lazy_exports`), and how
many CPUs this process may use (`available_cores`).
"""

from .cores import available_cores
from .jsonfile import read_json_object
from .lazy import lazy_exports

__all__ = ["available_cores", "lazy_exports", "read_json_object"]
