"""docs/DATABASE.md, gathered from every owner of a table: the store's groups and the job queue.

It sits in service, the lowest layer that sees both; store/schema_doc.py renders it. Run it with
`python -m rooftop.service.database_doc > docs/DATABASE.md`.
"""

from __future__ import annotations

from types import ModuleType

from rooftop.service import queue
from rooftop.store import agent_runs, baselines, connection, evaluations, schema_doc, sessions

COMMAND = "python -m rooftop.service.database_doc > docs/DATABASE.md"


def schemas() -> list[tuple[ModuleType, str]]:
    """Each owner and its schema, in the document's order: the file as a whole, then the tables as
    a verdict, its baselines, a job and a session come to be, then agent runs."""
    return [(connection, connection.ABOUT), (evaluations, evaluations.SCHEMA), (baselines, baselines.SCHEMA),
            (queue, queue.SCHEMA), (sessions, sessions.SCHEMA), (agent_runs, agent_runs.SCHEMA)]


def markdown() -> str:
    return schema_doc.markdown(schemas(), COMMAND)


if __name__ == "__main__":
    print(markdown(), end="")
