"""Fill each include region in lineage/sql (and in the fragments of lineage/sql/include/ that
include another) with its fragment, and each statement region of lineage/sql/functions with its
named query, so that psql runs what the service runs: `python -m lineage.db.include_sql` after
changing a fragment or a query."""

from lineage.db.functions import FUNCTIONS_DIR
from lineage.db.named_sql import INCLUDE_DIR, SQL_DIR, expand, fill_statements, fragments, load


def main() -> None:
    shared = fragments()
    for path in [*sorted(INCLUDE_DIR.glob("*.sql")), *sorted(SQL_DIR.glob("*.sql"))]:
        text = path.read_text()
        filled = expand(text, shared, path.name)
        if filled != text:
            path.write_text(filled)
            print(f"filled the include regions of {path.name}")
    queries = load()  # as the files now read
    for path in sorted(FUNCTIONS_DIR.glob("*.sql")):
        text = path.read_text()
        filled = fill_statements(text, queries)
        if filled != text:
            path.write_text(filled)
            print(f"filled the statement regions of functions/{path.name}")


if __name__ == "__main__":
    main()
