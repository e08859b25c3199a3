"""Named SQL: one file per query in `sql/`, parsed once into `QUERIES[name]`.

Each file runs as-is with `psql -v name=value -f sql/NAME.sql`; here its psql variables
(`:'name'` quoted, `:name` bare) become positional bind parameters, so no value is ever
spliced into SQL text.
"""

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# Inside the package, so that a wheel install carries the queries it runs.
SQL_DIR = Path(str(resources.files("lineage") / "sql"))

# `::type` casts are not variables; psql's own `:{?name}` and backslash commands are not used.
_VARIABLE = re.compile(r"(?<![:\w]):(?:'(?P<quoted>\w+)'|(?P<bare>[A-Za-z_]\w*))")
_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    text: str  # the file, exactly as psql runs it
    sql: str  # the same with $n placeholders
    parameters: tuple[str, ...]  # psql variable names, in $n order

    def arguments(self, values: dict[str, object]) -> list[object]:
        missing = [name for name in self.parameters if name not in values]
        if missing:
            raise KeyError(f"query {self.name} needs values for: {', '.join(missing)}")
        return [values[name] for name in self.parameters]


def parse(text: str, fallback_name: str) -> NamedQuery:
    name_match = _NAME.search(text)
    name = name_match.group(1) if name_match else fallback_name
    description = " ".join(
        line.removeprefix("--").strip()
        for line in text.splitlines()
        if line.startswith("--") and not _NAME.match(line)
    ).strip()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    parameters: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        variable = match.group("quoted") or match.group("bare")
        if variable not in parameters:
            parameters.append(variable)
        return f"${parameters.index(variable) + 1}"

    sql = _VARIABLE.sub(placeholder, body).strip().rstrip(";")
    return NamedQuery(name, description, text, sql, tuple(parameters))


def load(directory: Path = SQL_DIR) -> dict[str, NamedQuery]:
    queries: dict[str, NamedQuery] = {}
    for path in sorted(directory.glob("*.sql")):
        query = parse(path.read_text(), path.stem)
        if query.name != path.stem:
            raise ValueError(f"{path} is headed '-- name: {query.name}'; name it {query.name}.sql")
        queries[query.name] = query
    if not queries:
        raise RuntimeError(
            f"no named queries in {directory}: the package was installed without sql/"
        )
    return queries


QUERIES = load()
