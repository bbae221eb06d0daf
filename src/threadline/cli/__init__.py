"""The ``threadline`` command line (click). One module per command group."""
