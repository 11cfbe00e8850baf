"""`python -m rooftop`: the `rooftop` command."""

from rooftop.cli.entry import main

main()
