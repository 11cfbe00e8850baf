"""docs/DATABASE.md is made from the schemas' comments and describes every column a store and its
job queue have;
docs/CONFIGURATION.md names every environment variable rooftop/config.py registers."""

import re
import sqlite3
from pathlib import Path

from rooftop.config import VARIABLES
from rooftop.service.database_doc import COMMAND, markdown
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store

DOCS = Path(__file__).parents[1] / "docs"


def test_the_database_document_is_made_from_the_schema():
    assert (DOCS / "DATABASE.md").read_text() == markdown(), f"docs/DATABASE.md is stale: run `{COMMAND}`"


def test_every_column_of_a_new_store_has_a_meaning_in_the_document(tmp_path):
    JobQueue(Store(tmp_path / "r.db")).store.close()
    db = sqlite3.connect(tmp_path / "r.db")
    tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    sections = dict(re.findall(r"^## `(\w+)`\n(.*?)(?=^## |\Z)", (DOCS / "DATABASE.md").read_text(), re.M | re.S))
    assert sorted(sections) == tables
    missing = []
    for table in tables:
        rows = dict(re.findall(r"^\| `(\w+)` \| `[^`]*` \| (.*) \|$", sections[table], re.M))
        for column in (row[1] for row in db.execute(f"PRAGMA table_info({table})")):
            if not rows.get(column, "").strip():
                missing.append(f"{table}.{column}")
    assert not missing, f"columns without a meaning in docs/DATABASE.md: {missing}"


def test_every_environment_variable_is_in_the_configuration_document():
    text = (DOCS / "CONFIGURATION.md").read_text()
    assert [name for name in VARIABLES if f"`{name}`" not in text] == []
