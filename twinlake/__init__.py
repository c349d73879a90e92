"""twinlake: a data lake for Franka FR3 recordings and a MuJoCo system-identification engine.

The distribution is one package, ``twinlake``, whose sub-packages live in the repository's
top-level folders (``ingest/ catalog/ sql/ sim/ fit/ daemon/``); this folder is the layer
that composes them: the command-line app and its commands (``cli.py``, ``commands/``), the
demo, the replay of a lake run and synthetic recordings (docs/architecture.md).
"""

__version__ = "0.1.0"
