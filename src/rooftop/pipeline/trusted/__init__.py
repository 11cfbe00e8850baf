"""The trusted side of the pipeline: the child's session, the reference, the gates, the timing, the
checks and the verdict's figures. Nothing here runs in the child; it talks to it over the wire.
"""
