"""Named SQL: one file per query in `sql/`, parsed once into `QUERIES[name]`.

Each file runs as-is with `psql -v name=value -f sql/NAME.sql`; here its psql variables
(`:'name'` quoted, `:name` bare) become positional bind parameters, so no value is ever
spliced into SQL text.

SQL that several queries share (the step of a walk up or down the graph, a document's radius)
is written once, in `sql/include/NAME.sql`. A query, or another fragment, takes it in an include
region, which the loader fills with the fragment, so that every query runs the one text; the
copy in the file is what psql runs:

    -- include: walk_down
    ...
    -- end include: walk_down

After changing a fragment, `python -m lineage.db.include_sql` rewrites the copies;
tests/test_sql_includes.py fails while a file differs from what the loader runs.

A function in `sql/functions/` that answers a named query in one call holds that query's
statement, placeholders and all, in a statement region, filled by the same command:

    -- statement: walk_back
    ...
    -- end statement: walk_back
"""

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# Inside the package, so that a wheel install carries the queries it runs.
SQL_DIR = Path(str(resources.files("lineage") / "sql"))
INCLUDE_DIR = SQL_DIR / "include"

# `::type` casts are not variables; psql's own `:{?name}` and backslash commands are not used.
_VARIABLE = re.compile(r"(?<![:\w]):(?:'(?P<quoted>\w+)'|(?P<bare>[A-Za-z_]\w*))")
_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^[ \t]*-- include: \w+[ \t]*$", re.MULTILINE)
_REGION = re.compile(
    r"^(?P<open>(?P<indent>[ \t]*)-- include: (?P<name>\w+)[ \t]*\n)"
    r".*?"
    r"^(?P<close>(?P=indent)-- end include: (?P=name)[ \t]*\n)",
    re.MULTILINE | re.DOTALL,
)


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


def fragments(directory: Path = INCLUDE_DIR) -> dict[str, str]:
    """Each shared fragment's SQL by name: its file without the comment lines heading it, its
    own include regions filled (one level: a fragment that includes one includes no other)."""
    found: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        lines = path.read_text().splitlines(keepends=True)
        first = next((i for i, line in enumerate(lines) if not line.startswith("--")), len(lines))
        found[path.stem] = "".join(lines[first:])
    return {
        name: expand(text, found, f"{directory.name}/{name}.sql") for name, text in found.items()
    }


def expand(text: str, includes: dict[str, str], where: str) -> str:
    """The text with each include region holding its fragment, whatever it held."""

    def fill(region: re.Match[str]) -> str:
        if region["name"] not in includes:
            raise ValueError(f"{where}: there is no {INCLUDE_DIR.name}/{region['name']}.sql")
        return region["open"] + includes[region["name"]] + region["close"]

    if _INCLUDE.search(_REGION.sub("", text)):  # an include line outside every region
        raise ValueError(f"{where}: an `-- include: NAME` line needs its `-- end include: NAME`")
    return _REGION.sub(fill, text)


_STATEMENT = re.compile(
    r"^(?P<open>(?P<indent>[ \t]*)-- statement: (?P<name>\w+)[ \t]*\n)"
    r".*?"
    r"^(?P<close>(?P=indent)-- end statement: (?P=name)[ \t]*\n)",
    re.MULTILINE | re.DOTALL,
)


def fill_statements(text: str, queries: dict[str, NamedQuery]) -> str:
    """The text with each statement region holding its named query's statement ($n for its
    psql variables, in their order), indented as the region's opening line."""

    def fill(region: re.Match[str]) -> str:
        if region["name"] not in queries:
            raise ValueError(f"a statement region names {region['name']}: there is no such query")
        lines = queries[region["name"]].sql.splitlines()
        statement = "".join(f"{region['indent']}{line}".rstrip() + "\n" for line in lines)
        return region["open"] + statement + region["close"]

    return _STATEMENT.sub(fill, text)


def load(directory: Path = SQL_DIR) -> dict[str, NamedQuery]:
    includes = fragments(directory / INCLUDE_DIR.name)
    queries: dict[str, NamedQuery] = {}
    for path in sorted(directory.glob("*.sql")):
        query = parse(expand(path.read_text(), includes, path.name), path.stem)
        if query.name != path.stem:
            raise ValueError(f"{path} is headed '-- name: {query.name}'; name it {query.name}.sql")
        queries[query.name] = query
    if not queries:
        raise RuntimeError(
            f"no named queries in {directory}: the package was installed without sql/"
        )
    return queries


QUERIES = load()
