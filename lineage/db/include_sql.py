"""Fill each include region in lineage/sql (and in the fragments of lineage/sql/include/ that
include another) with its fragment, so that psql runs what the service runs:
`python -m lineage.db.include_sql` after changing a fragment."""

from lineage.db.named_sql import INCLUDE_DIR, SQL_DIR, expand, fragments


def main() -> None:
    shared = fragments()
    for path in [*sorted(INCLUDE_DIR.glob("*.sql")), *sorted(SQL_DIR.glob("*.sql"))]:
        text = path.read_text()
        filled = expand(text, shared, path.name)
        if filled != text:
            path.write_text(filled)
            print(f"filled the include regions of {path.name}")


if __name__ == "__main__":
    main()
