"""`python -m twinlake.ingest PATH...`: the `twinlake ingest` command on its own (same
function, faster start-up: it does not compose the other commands). The command lives with the
others in the root package (twinlake/commands/ingest.py)."""

from ..commands.ingest import main

main()
