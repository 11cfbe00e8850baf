"""Coding agents on kernel work: each run in a fresh, sandboxed workspace that reaches the engine
only through `./check` and `./bench`, graded afterwards on every shape, held-out ones included.

    workspace.py   the run's folder: prompt, reference, visible shapes, starter, the two commands
    gateway.py     the trusted end of `./check` and `./bench`: visible shapes, through the service
    sandbox.py     bwrap for the agent process: only the workspace writable, named secrets only
    egress.py      the sandbox's only way out: a CONNECT proxy to the run's listed endpoints
    relay.py       inside the sandbox: loopback listeners leading to the egress proxy (stdlib only)
    runner.py      one run: launch under a budget, kill the tree, grade, record
    adapters/      one module per agent CLI: its command line, transcript, usage
    llm.py         the built-in agent over any OpenAI-compatible endpoint
    search.py      tree search over candidates through the service
    sweep.py       agents x models x problems x repeats, resumable
"""
