"""Fill each include region in lineage/sql with its fragment from lineage/sql/include/, so that
psql runs what the service runs: `python -m lineage.db.include_sql` after changing a fragment."""

from lineage.db.queries import SQL_DIR, expand, fragments


def main() -> None:
    shared = fragments()
    for path in sorted(SQL_DIR.glob("*.sql")):
        text = path.read_text()
        filled = expand(text, shared, path.name)
        if filled != text:
            path.write_text(filled)
            print(f"filled the include regions of {path.name}")


if __name__ == "__main__":
    main()
