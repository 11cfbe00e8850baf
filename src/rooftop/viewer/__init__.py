"""What happened, as pages that open offline: a run's transcript, solution, verdicts and tool
calls (`rooftop view`), and an index of runs. Everything is inline: CSS, the little JS for tabs,
and syntax highlighting, which Pygments does here rather than a script from a CDN."""
