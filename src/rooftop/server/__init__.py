"""`rooftop serve`: the environment API and plain evaluations over HTTP, and a client for it."""
