"""The evaluation child's side of the pipeline: the only code that runs beside candidate code.

It imports nothing of the trusted side (pipeline/trusted/), only the wire (pipeline/wire.py and its
channel) and the job (pipeline/job.py); tests/test_layers.py holds it to that.
"""
