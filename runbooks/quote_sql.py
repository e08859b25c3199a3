"""Rewrite every `<!-- sql/X.sql -->` block in the runbooks from the file itself.

Run after changing a file in sql/: `python runbooks/quote_sql.py`. tests/test_runbooks.py
fails while a quote and its file differ.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUOTE = re.compile(r"(<!-- (sql/[\w/]+\.sql) -->\n```sql\n)(.*?)(```)", re.DOTALL)


def requote(text: str) -> str:
    def fresh(match: re.Match[str]) -> str:
        body = (ROOT / match.group(2)).read_text()
        return match.group(1) + body.rstrip("\n") + "\n" + match.group(4)

    return QUOTE.sub(fresh, text)


if __name__ == "__main__":
    for page in sorted((ROOT / "runbooks").glob("*.md")):
        page.write_text(requote(page.read_text()))
