"""Every setting, in one place: environment variables `LINEAGE_*`, or a TOML/.env config file."""

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "lineage"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LINEAGE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    database_url: str | None = Field(
        default=None, description="Postgres to use; unset means the embedded server in data_dir"
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    app_role: str = "lineage_app"
    host: str = "127.0.0.1"
    port: int = 8765
    statement_timeout_ms: int = 5000
    default_max_depth: int = 20
    max_depth_limit: int = 100
    max_body_bytes: int = 8 * 1024 * 1024
    max_batch_records: int = 50_000
    stream_threshold: int = 1000
    log_level: Literal["debug", "info", "warning", "error"] = "info"


def load_settings(config_file: Path | None = None) -> Settings:
    """Environment wins over the config file, which wins over the defaults."""
    if config_file is None:
        return Settings()
    return Settings(_env_file=config_file)
