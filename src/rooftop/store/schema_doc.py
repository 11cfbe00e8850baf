"""docs/DATABASE.md, rendered from the comments in the tables' schemas.

Each column's meaning sits on its line of the schema, so changing a column and describing it are one
edit, and tests/test_schema_doc.py fails until the document is made again. The schemas are gathered
from their owners, the store's groups and the job queue, by service/database_doc.py (the lowest layer
that sees both), which is also the command.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from types import ModuleType

_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \($")
_INDEX = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+) ON (\w+)\((.*)\);$")
_CONSTRAINTS = ("PRIMARY KEY", "UNIQUE", "FOREIGN KEY", "CHECK")


@dataclass
class Table:
    name: str
    about: str
    columns: list[list[str]] = field(default_factory=list)  # [name, declaration, meaning]
    notes: list[str] = field(default_factory=list)  # table constraints and indexes


def parse(schema: str) -> tuple[str, list[Table]]:
    """The comment paragraph before the first table, and the tables with their comments."""
    preamble, comment, tables, table = "", list[str](), dict[str, Table](), None
    for line in (raw.strip() for raw in schema.splitlines()):
        if line.startswith("--"):
            if table is not None and table.columns:  # a column's meaning, continued
                table.columns[-1][2] += " " + line[2:].strip()
            else:
                comment.append(line[2:].strip())
        elif not line:
            preamble, comment = (" ".join(comment) if not tables and not preamble else preamble), []
        elif match := _TABLE.match(line):
            table = tables[match[1]] = Table(match[1], " ".join(comment).removeprefix(f"{match[1]}: "))
            comment = []
        elif line == ");":
            table = None
        elif match := _INDEX.match(line):
            tables[match[2]].notes.append(f"index `{match[1]}` on ({match[3]})")
        elif table is not None and line.startswith(_CONSTRAINTS):
            table.notes.append(f"`{line.rstrip(',')}`")
        elif table is not None:
            code, _, meaning = line.partition("--")
            name, _, declaration = code.strip().rstrip(",").partition(" ")
            table.columns.append([name, declaration, meaning.strip()])
    return preamble, list(tables.values())


def markdown(schemas: list[tuple[ModuleType, str]], command: str) -> str:
    """The whole document from (owner, schema) pairs in the document's order: an introduction, then
    each table's meaning and columns."""
    preamble, tables = parse("".join(schema for _owner, schema in schemas))
    owners = ", ".join("src/" + owner.__name__.replace(".", "/") + ".py" for owner, _schema in schemas)
    lines = ["# The results database", "",
             *textwrap.wrap(f"Generated from the comments in the tables' schemas ({owners}); edit them, "
                            f"not this file, and make it again with `{command}`.", 100), "",
             *textwrap.wrap(preamble, 100)]
    for table in tables:
        about = table.about[:1].upper() + table.about[1:]
        lines += ["", f"## `{table.name}`", "", *textwrap.wrap(about, 100), "",
                  "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{name}` | `{declaration}` | {meaning.replace('|', '/')} |"
                  for name, declaration, meaning in table.columns]
        if table.notes:
            lines += ["", *textwrap.wrap("Constraints and indexes: " + "; ".join(table.notes) + ".", 100)]
    return "\n".join(lines) + "\n"
