"""The shell examples of README.md and docs/*.md run, as the runbooks' do (tests/test_runbooks.py).

Which blocks run: every ```bash block, unless the line above its fence is
`<!-- not run: REASON -->`. Blocks of other languages do not run: ```python snippets are
fragments of a program, ```console blocks are usage lines, a bare ``` block is a listing. A
```text block right after a block that runs is what that block prints: each of its lines must
appear in the output, in order, `…` standing for anything.

How they run: a page's blocks run in order, each as a bash script (`set -euo pipefail`), in a
temporary folder holding a link to sql/, with `lineage` from this environment, against
- a fresh copy of a database holding the demo incident: LINEAGE_DATABASE_URL, and PGHOST,
  PGPORT, PGDATABASE for psql;
- a real server on it (keys on) on a free port: the page's `http://127.0.0.1:8765` becomes its
  address, and LINEAGE_API_KEY holds a read key of tenant default;
- a copy of the session's keys in LINEAGE_DATA_DIR.
What the test has done already is not done again: `pip install …` and `pytest …` (this
environment), `lineage serve …` and `lineage stop` (the test's server) become `true`. curl fails
on an HTTP error status, as any failing command fails its block.
"""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from lineage.api.app import create_app
from lineage.settings import Settings
from tests.fences import fences
from tests.live_server import serve

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md")))]
DOCUMENTED_ADDRESS = "http://127.0.0.1:8765"

NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>.+\S) -->$")
LANGUAGES = {"bash", "text", "python", "console", ""}
# Steps the test has taken itself, as they appear in a command line.
DONE_ALREADY = (
    re.compile(r"\bpip install [^&;|#]*"),
    re.compile(r"\bpytest\b[^&;|#]*"),
    re.compile(r"^\s*lineage (?:serve|stop)\b[^&;|#]*"),
)
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    not_run: str | None  # the reason, from the comment above the fence
    output: str | None  # the ```text block that follows, when this block runs

    @property
    def runs(self) -> bool:
        return self.lang == "bash" and self.not_run is None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def parse_page(page: str) -> list[Block]:
    lines = (ROOT / page).read_text().split("\n")
    found: list[tuple[int, str, str, str | None]] = []
    for fence in fences(lines, page):
        above = lines[fence.opening - 1] if fence.opening > 0 else ""
        marker = NOT_RUN.match(above)
        reason = marker["reason"] if marker else None
        found.append((fence.opening + 1, fence.lang, fence.body, reason))
    blocks = []
    for number, (line, lang, body, reason) in enumerate(found):
        output = None
        if lang == "bash" and reason is None and number + 1 < len(found):
            next_line, next_lang, next_body, _ = found[number + 1]
            between = lines[line : next_line - 1]
            closing = between.index("```")
            if next_lang == "text" and not "".join(between[closing + 1 :]).strip():
                output = next_body
        blocks.append(Block(page, line, lang, body, reason, output))
    return blocks


BLOCKS = [block for page in PAGES for block in parse_page(page)]
RUN_PAGES = sorted({block.page for block in BLOCKS if block.runs}, key=PAGES.index)


# --- The pages and their blocks -----------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_of_a_known_kind_and_every_marker_belongs_to_one(page: str) -> None:
    lines = (ROOT / page).read_text().split("\n")
    for number, line in enumerate(lines, start=1):
        assert not re.match(r"^\s+```", line), f"{page}:{number}: an indented fence is not checked"
        if line.startswith("<!-- not run"):
            assert NOT_RUN.match(line), f"{page}:{number}: say why: <!-- not run: REASON -->"
            assert lines[number] == "```bash", f"{page}:{number}: not above a ```bash block"
    blocks = parse_page(page)
    for before, block in zip([None, *blocks], blocks, strict=False):
        assert block.lang in LANGUAGES, f"{block.name}: unknown block {block.lang!r}"
        if block.lang == "text":
            assert before is not None and before.output == block.body, (
                f"{block.name}: a ```text block shows the output of a ```bash block just above"
            )


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_names_a_file_of_the_checkout(page: str) -> None:
    text = (ROOT / page).read_text()
    for match in LINK.finditer(text):
        target = match["target"].split("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        assert ((ROOT / page).parent / target).exists(), f"{page}: {match[0]} leads nowhere"


def test_the_readme_links_every_page_of_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    unlinked = [page for page in PAGES[1:] if f"]({page})" not in readme]
    assert unlinked == [], f"README.md links no {unlinked}"


def test_the_common_examples_run() -> None:
    """The walk-back, the blast radius, the demo and a keyed HTTP call are never marked."""
    run = "\n".join(block.body for block in BLOCKS if block.runs)
    for command in ("lineage demo", "lineage walk answer_1", "lineage impact", "curl -s -H"):
        assert command in run, f"no example that runs says {command!r}"


# --- Running them ---------------------------------------------------------------------------


# An HTTP error fails the block as a failing command does.
PRELUDE = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n'


def script_of(block: Block, address: str) -> str:
    """The block as bash runs it here: the test's address, and no step the test has taken."""
    lines = []
    for line in block.body.replace(DOCUMENTED_ADDRESS, address).split("\n"):
        command, hash_, comment = line.partition(" #")
        for step in DONE_ALREADY:
            command = step.sub("true ", command)
        lines.append(command + hash_ + comment)
    return PRELUDE + "\n".join(lines) + "\n"


def assert_shown(block: Block, printed: str) -> None:
    """Each line of the block's ```text output appears in what it printed, in order."""
    assert block.output is not None
    at = 0
    for line in filter(None, (line.strip() for line in block.output.split("\n"))):
        for piece in filter(None, line.split("…")):
            found = printed.find(piece, at)
            assert found >= 0, f"{block.name}: the output lacks {piece!r}:\n{printed}"
            at = found + len(piece)


def environment(database_url: str, work: Path) -> dict[str, str]:
    # conninfo, not urlsplit: the embedded server's URL names its socket folder in the query.
    parts = conninfo_to_dict(database_url)
    data = work / "data"
    shutil.copytree(os.environ["LINEAGE_DATA_DIR"], data)  # the keys the demo was signed with
    return {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "LINEAGE_DATABASE_URL": database_url,
        "LINEAGE_DATA_DIR": str(data),
        "PGHOST": str(parts.get("host") or "127.0.0.1"),
        "PGPORT": str(parts.get("port") or 5432),
        "PGDATABASE": str(parts["dbname"]),
        "COLUMNS": "200",
    }


def run(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_examples_of_the_page_run(page: str, demo_database: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "sql").symlink_to(ROOT / "sql")
    env = environment(demo_database, tmp_path)
    key = run("lineage key create --tenant default --scope read", env, work)
    assert key.returncode == 0, key.stderr
    env["LINEAGE_API_KEY"] = key.stdout.split()[-1]
    with serve(create_app(Settings(auth="keys"), database_url=demo_database)) as address:
        for block in (block for block in parse_page(page) if block.runs):
            done = run(script_of(block, address), env, work)
            assert done.returncode == 0, (
                f"{block.name}: exit {done.returncode}\n{block.body}\n"
                f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
            if block.output is not None:
                assert_shown(block, done.stdout)
