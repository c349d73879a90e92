"""`python -m twinlake.ingest PATH...`: the `twinlake ingest` command on its own (same
function, faster start-up: it does not compose the other folders' commands)."""

import typer

from twinlake.ingest.cli import ingest_command

typer.run(ingest_command)
