"""`python -m rooftop.pipeline.child`: the evaluation child, as the trusted side starts it."""

import sys

from rooftop.pipeline.child.harness import main

sys.exit(main(sys.argv[1:]))
