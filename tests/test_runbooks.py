"""The runbooks in runbooks/ stay true.

Every SQL block marked `<!-- sql/NAME.sql -->` is that file, byte for byte. Every command in a
```sh block runs against a real database with the demo incident loaded: psql as a subprocess,
`lineage ...` through typer's CliRunner, `curl` through the app's ASGI client. A command block
may be followed by `Expect (demo data): `id`, `id`` and then every command of the block must
print each of those ids.
"""

import re
import shlex
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.api.app import create_app
from lineage.services import auth
from lineage.settings import Settings
from tests.fences import fences

ROOT = Path(__file__).resolve().parents[1]
RUNBOOKS = ROOT / "runbooks"
INDEX = "README.md"
PAGES = (
    "walk-back.md",
    "right-to-be-forgotten.md",
    "migration.md",
    "eval-regression.md",
    "freshness.md",
    "backup.md",
    "scale-out.md",
)
PSQL = shutil.which("psql") or "/usr/bin/psql"
DATABASE_URL_VARIABLE = "$LINEAGE_DATABASE_URL"

SQL_MARKER = re.compile(r"^<!-- (?P<path>sql/\S+) -->$")
EXPECT = re.compile(r"^Expect \(demo data\):(?P<ids>.*)$")
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1"}
COMMANDS = {"psql", "lineage", "curl"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a runbook page."""

    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    body: str  # the lines between the fences
    marker: str | None  # `sql/NAME.sql` from the comment on the line above the fence
    expect: tuple[str, ...]  # ids from an `Expect (demo data):` line below the block


@dataclass(frozen=True)
class Command:
    """One command line of a ```sh block (backslash continuations joined)."""

    page: str
    line: int
    argv: tuple[str, ...]
    expect: tuple[str, ...]

    @property
    def name(self) -> str:
        if self.argv[0] == "psql" and "-f" in self.argv:
            what = f"psql -f {self.argv[self.argv.index('-f') + 1]}"
        else:
            what = " ".join(self.argv[:3])
        return f"{self.page}:{self.line}:{what}"


def parse_page(path: Path) -> list[Block]:
    lines = path.read_text().split("\n")
    blocks: list[Block] = []
    for fence in fences(lines, path.name):
        marker = SQL_MARKER.match(lines[fence.opening - 1]) if fence.opening > 0 else None
        after = fence.closing + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        expect = EXPECT.match(lines[after]) if after < len(lines) else None
        blocks.append(
            Block(
                page=path.name,
                line=fence.opening + 1,
                lang=fence.lang,
                body=fence.body,
                marker=marker["path"] if marker else None,
                expect=tuple(re.findall(r"`([^`]+)`", expect["ids"])) if expect else (),
            )
        )
    return blocks


def commands_of(block: Block) -> Iterator[Command]:
    lines = block.body.split("\n")
    index = 0
    while index < len(lines):
        start = index
        text = lines[index]
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
        index += 1
        if text.strip() and not text.lstrip().startswith("#"):
            argv = tuple(shlex.split(text))
            yield Command(block.page, block.line + 1 + start, argv, block.expect)


def all_blocks() -> list[Block]:
    return [block for path in sorted(RUNBOOKS.glob("*.md")) for block in parse_page(path)]


BLOCKS = all_blocks()
SQL_BLOCKS = [block for block in BLOCKS if block.lang == "sql"]
ALL_COMMANDS = [command for block in BLOCKS if block.lang == "sh" for command in commands_of(block)]
PSQL_COMMANDS = [command for command in ALL_COMMANDS if command.argv[0] == "psql"]
CLI_COMMANDS = [
    command
    for command in ALL_COMMANDS
    if command.argv[0] == "lineage" and command.argv[1:2] != ("serve",)
]
HTTP_COMMANDS = [command for command in ALL_COMMANDS if command.argv[0] == "curl"]


def names(commands: list[Command]) -> list[str]:
    return [command.name for command in commands]


def assert_expected(command: Command, output: str) -> None:
    missing = [expected for expected in command.expect if expected not in output]
    assert not missing, f"{command.name}: output lacks {missing}:\n{output}"


# --- The pages and their structure -------------------------------------------------------


def test_every_page_is_there_and_indexed() -> None:
    present = sorted(path.name for path in RUNBOOKS.glob("*.md"))
    assert present == sorted([INDEX, *PAGES])
    index = (RUNBOOKS / INDEX).read_text()
    for page in PAGES:
        assert f"]({page})" in index, f"{INDEX} does not link {page}"


@pytest.mark.parametrize("page", PAGES)
def test_every_runbook_quotes_sql(page: str) -> None:
    quoted = [block for block in parse_page(RUNBOOKS / page) if block.marker]
    assert quoted, f"{page} quotes no file from sql/"


@pytest.mark.parametrize("page", [INDEX, *PAGES])
def test_markers_and_expectations_belong_to_a_block(page: str) -> None:
    lines = (RUNBOOKS / page).read_text().split("\n")
    blocks = parse_page(RUNBOOKS / page)
    for number, line in enumerate(lines, start=1):
        assert not re.match(r"^\s+```", line), f"{page}:{number}: indented fence is not checked"
        if SQL_MARKER.match(line):
            assert lines[number] == "```sql", f"{page}:{number}: marker not above a ```sql block"
    expectations = sum(1 for line in lines if EXPECT.match(line))
    attached = [block for block in blocks if block.expect]
    assert expectations == len(attached), f"{page}: an Expect line follows no block"
    for block in blocks:
        # shell: server commands, run in order by tests/test_backup.py; conf: settings shown.
        assert block.lang in {"sql", "sh", "shell", "conf"}, (
            f"{page}:{block.line}: unknown block {block.lang!r}"
        )
        assert not block.expect or block.lang == "sh", f"{page}:{block.line}: Expect after SQL"


@pytest.mark.parametrize(
    "block", SQL_BLOCKS, ids=[f"{b.page}:{b.line}:{b.marker}" for b in SQL_BLOCKS]
)
def test_quoted_sql_is_the_file(block: Block) -> None:
    assert block.marker, f"{block.page}:{block.line}: SQL without a <!-- sql/NAME.sql --> marker"
    path = ROOT / block.marker
    assert path.is_file(), f"{block.page}:{block.line}: quotes {block.marker}, which does not exist"
    assert block.body == path.read_text().removesuffix("\n"), (
        f"{block.page}:{block.line}: the quote differs from {block.marker}"
    )


def test_quoting_a_missing_file_fails(tmp_path: Path) -> None:
    page = tmp_path / "made-up.md"
    page.write_text("<!-- sql/no_such_query_for_this_test.sql -->\n```sql\nSELECT 1;\n```\n")
    [block] = parse_page(page)
    with pytest.raises(AssertionError, match="does not exist"):
        test_quoted_sql_is_the_file(block)


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=names(ALL_COMMANDS))
def test_commands_are_plain(command: Command) -> None:
    """The test runs each line as one command: no pipes, redirections or unknown programs."""
    assert command.argv[0] in COMMANDS, f"{command.name}: the test cannot run {command.argv[0]}"
    operators = SHELL_OPERATORS.intersection(command.argv)
    assert not operators, f"{command.name}: shell operators {operators}"


@pytest.mark.parametrize("command", PSQL_COMMANDS, ids=names(PSQL_COMMANDS))
def test_psql_commands_quote_their_file(command: Command) -> None:
    [sql_file] = [value for flag, value in flags(command) if flag == "-f"]
    quoted = {block.marker for block in parse_page(RUNBOOKS / command.page)}
    assert sql_file in quoted, f"{command.name}: runs {sql_file} but the page does not quote it"
    assert command.expect, f"{command.name}: say which demo ids to expect"


def test_the_pages_run_every_command_form() -> None:
    for kind, commands in (("psql", PSQL_COMMANDS), ("CLI", CLI_COMMANDS), ("HTTP", HTTP_COMMANDS)):
        pages = {command.page for command in commands}
        assert set(PAGES) <= pages, f"pages without a {kind} command: {set(PAGES) - pages}"


# --- Running them -------------------------------------------------------------------------


def flags(command: Command) -> list[tuple[str, str]]:
    """psql's arguments as (flag, value) pairs: the connection first, then -v and -f."""
    argv = command.argv
    assert argv[1] == DATABASE_URL_VARIABLE, f"{command.name}: connect with {DATABASE_URL_VARIABLE}"
    rest = argv[2:]
    assert len(rest) % 2 == 0, f"{command.name}: a flag without a value"
    pairs = [(rest[index], rest[index + 1]) for index in range(0, len(rest), 2)]
    unknown = [flag for flag, _ in pairs if flag not in {"-v", "-f"}]
    assert not unknown, f"{command.name}: the test does not model {unknown}"
    return pairs


@pytest.mark.parametrize("command", PSQL_COMMANDS, ids=names(PSQL_COMMANDS))
def test_psql_command_runs(command: Command, demo_database: str) -> None:
    arguments: list[str] = [demo_database]
    for flag, value in flags(command):
        if flag == "-v":
            name, equals, _ = value.partition("=")
            assert name and equals, f"{command.name}: -v {value} is not name=value"
        arguments += [flag, value]
    done = subprocess.run(
        # -X: no ~/.psqlrc; ON_ERROR_STOP: a failing statement fails the run (psql exits 0
        # otherwise, even on a syntax error from a missing -v).
        [PSQL, "-X", "-v", "ON_ERROR_STOP=1", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{command.name}: exit {done.returncode}\n{done.stderr}"
    assert "ERROR" not in done.stderr, f"{command.name}:\n{done.stderr}"
    assert_expected(command, done.stdout)


@pytest.fixture
def cli_env(demo_database: str) -> dict[str, str]:
    return {"LINEAGE_DATABASE_URL": demo_database, "COLUMNS": "200"}


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=names(CLI_COMMANDS))
def test_cli_command_runs(command: Command, cli_env: dict[str, str]) -> None:
    result = CliRunner().invoke(cli.app, list(command.argv[1:]), env=cli_env)
    assert result.exit_code == 0, (
        f"{command.name}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    )
    assert_expected(command, result.output)


API_KEY_VARIABLE = "$LINEAGE_API_KEY"


def request_of(command: Command, api_key: str) -> tuple[str, dict[str, str]]:
    """curl's URL as a path and query for the app, and its -H headers (with the key that
    $LINEAGE_API_KEY names in the shell)."""
    url, headers = None, {}
    arguments = iter(command.argv[1:])
    for argument in arguments:
        if argument == "-s":
            continue
        if argument == "-H":
            name, _, value = next(arguments).replace(API_KEY_VARIABLE, api_key).partition(":")
            headers[name.strip()] = value.strip()
        elif argument.startswith("http://") and url is None:
            url = argument
        else:
            raise AssertionError(f"{command.name}: the test does not model {argument!r}")
    assert url is not None, f"{command.name}: no URL"
    parts = urlsplit(url)
    return urlunsplit(("", "", parts.path, parts.query, "")), headers


@pytest.fixture
async def keyed_client(demo_database: str) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The app as deployed (LINEAGE_AUTH=keys) and a read key of tenant default."""
    app = create_app(Settings(auth="keys"), database_url=demo_database)
    async with app.router.lifespan_context(app):
        api_key, _ = await auth.create_key(app.state.db, "default", "read")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http, api_key


@pytest.mark.parametrize("command", HTTP_COMMANDS, ids=names(HTTP_COMMANDS))
async def test_http_call_works(
    command: Command, keyed_client: tuple[httpx.AsyncClient, str]
) -> None:
    client, api_key = keyed_client
    target, headers = request_of(command, api_key)
    response = await client.get(target, headers=headers)
    assert response.status_code == 200, f"{command.name}: {response.status_code} {response.text}"
    assert_expected(command, response.text)
