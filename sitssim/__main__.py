"""``python -m sitssim`` runs the command line."""

from sitssim.cli import main

main()
