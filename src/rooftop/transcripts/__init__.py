"""Agent transcripts, whatever CLI wrote them, as one event model (events.py): a parser per
format (parsers/), and the format told from the file itself (detect.py)."""
