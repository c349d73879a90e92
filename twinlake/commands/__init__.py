"""The command-line commands of `twinlake`, one module per concern; twinlake/cli.py registers
them. Each module imports only typer and twinlake/options.py at the top (so `twinlake --help`
stays fast) and its commands import the folders' code they run when they run:

    lake.py         sql, catalog runs, intervals            (twinlake.catalog)
    ingest.py       ingest, export bundle, validate bundle, import frankatwin   (twinlake.ingest)
    simulation.py   sim replay, sim record                  (twinlake/replay.py, twinlake.daemon)
    daemon.py       daemon serve, record ..., excite        (twinlake.daemon)
    fit.py          fit run | list | show | export          (twinlake.fit)
    validation.py   fit validate | quick | report           (twinlake.fit)
"""
