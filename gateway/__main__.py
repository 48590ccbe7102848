"""``python -m gateway`` runs the ``confer`` command line."""

from gateway.cli import main

main()
