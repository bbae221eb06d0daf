"""``python -m threadline`` runs the CLI."""

from threadline.cli.main import main

main()
