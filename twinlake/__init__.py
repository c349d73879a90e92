"""twinlake: a data lake for Franka FR3 recordings and a MuJoCo system-identification engine.

The distribution is one package, ``twinlake``, whose sub-packages live in the repository's
top-level folders (``ingest/ catalog/ sql/ sim/ fit/ daemon/``); this folder holds only the
root command-line app that composes each folder's own ``cli.py``.
"""

__version__ = "0.1.0"
