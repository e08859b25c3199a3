"""docker-compose.yml stays runnable without a Docker engine: every `lineage` command in it (and
in its comments) parses with the real CLI, migrations run before the API, and its settings are
settings the service knows."""

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.main import get_command

from lineage.cli import app
from lineage.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def parse(argv: list[str]) -> None:
    """Resolve `lineage ...` to its command and parse its arguments, without running it."""
    assert argv[0] == "lineage", argv
    command: Any = get_command(app)
    words = argv[1:]
    while hasattr(command, "commands"):  # a group: the next word names a subcommand
        name, *words = words
        assert name in command.commands, f"`{shlex.join(argv)}`: no command {name!r}"
        command = command.commands[name]
    command.make_context(command.name, words)  # raises on unknown options or arguments


def test_every_service_command_exists_in_the_cli() -> None:
    services = compose()["services"]
    commands = {name: s["command"] for name, s in services.items() if "command" in s}
    assert commands == {
        "migrate": ["lineage", "migrate"],
        "api": ["lineage", "serve", "--host", "0.0.0.0", "--port", "8765"],
    }
    for argv in commands.values():
        parse(argv)
    with pytest.raises(AssertionError, match="no command 'serv'"):
        parse(["lineage", "serv"])
    with pytest.raises(Exception, match="No such option"):
        parse(["lineage", "serve", "--hots", "0.0.0.0"])


def test_the_commented_commands_exist_in_the_cli() -> None:
    commented = re.findall(r"^#\s+docker compose run --rm \w+ (lineage .+)$", COMPOSE.read_text(),
                           re.MULTILINE)  # fmt: skip
    assert len(commented) == 2
    for line in commented:
        parse(shlex.split(line))


def test_migrations_finish_before_the_api_starts_and_postgres_is_up_before_them() -> None:
    services = compose()["services"]
    assert services["api"]["depends_on"] == {
        "migrate": {"condition": "service_completed_successfully"}
    }
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["db"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]


def test_the_services_use_settings_the_service_knows_and_an_image_built_here() -> None:
    services = compose()["services"]
    for name in ("migrate", "api"):
        environment = services[name]["environment"]
        unknown = {
            key
            for key in environment
            if key.removeprefix("LINEAGE_").lower() not in Settings.model_fields
        }
        assert unknown == set(), f"{name}: no such settings {unknown}"
        database = environment["LINEAGE_DATABASE_URL"]
        db = services["db"]["environment"]
        assert database == (
            f"postgresql://{db['POSTGRES_USER']}:{db['POSTGRES_PASSWORD']}@db:5432/"
            f"{db['POSTGRES_DB']}"
        )
        assert services[name]["build"] == "."
    dockerfile = (ROOT / "Dockerfile").read_text()
    # Non-editable, with the OTLP intake's decoder (POST /v1/traces).
    assert 'pip install --no-cache-dir ".[otlp]"' in dockerfile
    assert ".venv" in (ROOT / ".dockerignore").read_text().split()


def test_the_keys_live_on_a_volume_that_outlives_the_containers() -> None:
    loaded = compose()
    for name in ("migrate", "api"):
        service = loaded["services"][name]
        data_dir = service["environment"]["LINEAGE_DATA_DIR"]
        mounts = {
            target: source for source, _, target in (v.partition(":") for v in service["volumes"])
        }
        assert data_dir in mounts, f"{name}: {data_dir} (the keys) is not on a volume"
        assert mounts[data_dir] in loaded["volumes"], "a named volume, not the container's layer"
        settings = Settings(data_dir=data_dir)
        assert settings.signing_keys_file is None and settings.log_signing_key_file is None


def test_the_metrics_token_is_passed_through_and_empty_means_unset() -> None:
    environment = compose()["services"]["api"]["environment"]
    assert environment["LINEAGE_METRICS_TOKEN"] == "${LINEAGE_METRICS_TOKEN:-}"
    assert Settings(metrics_token="").metrics_token is None
    assert Settings(session_secret="").session_secret is None
    assert "set below" not in COMPOSE.read_text()
