"""Many evaluations at once: a durable job queue in the results store, a build pool, one
exclusive worker per device, and the backends that run them (local processes, or Ray)."""
