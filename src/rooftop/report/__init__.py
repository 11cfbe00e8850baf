"""Reports over the results store: a leaderboard of agent runs (or of plain evaluations), its
plots, and the audit notes people attach to runs.

Reading only, apart from the `annotations` table that `rooftop annotate` appends to. Nothing here
imports torch: a report of a thousand runs is built from stored documents in seconds.
"""
