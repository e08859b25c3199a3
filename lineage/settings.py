"""Every setting, in one place: environment variables `LINEAGE_*`, or a TOML/.env config file."""

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "lineage"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LINEAGE_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    database_url: str | None = Field(
        default=None, description="Postgres to use; unset means the embedded server in data_dir"
    )
    read_database_url: str | None = Field(
        default=None,
        description="a hot standby (streaming replica) of database_url that every read route "
        "reads; appends, verdicts, audit rows, checkpoints and the event stream's LISTEN stay "
        "on the primary. Unset means reads go to the primary too",
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    app_role: str = "lineage_app"
    host: str = "127.0.0.1"
    port: int = 8765
    statement_timeout_ms: int = 5000
    default_max_depth: int = 20
    max_depth_limit: int = 100
    max_body_bytes: int = 8 * 1024 * 1024
    body_read_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="a request body must arrive whole within this; else 408 (a slow or idle "
        "upload never holds a slot)",
    )
    header_read_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="a connection must finish its request headers within this of opening or of "
        "its last answer, else it is closed (a silent or half-sent socket holds nothing)",
    )
    max_connections_per_address: int = Field(
        default=128,
        ge=0,
        description="connections one client address may hold to one server process; more are "
        "closed at once. Behind a proxy every client has its address: raise it. 0 means no cap",
    )
    max_batch_records: int = 50_000
    stream_threshold: int = 1000
    max_spans_per_request: int = 5000
    max_spans_per_trace: int = 10_000
    events_poll_s: float = Field(
        default=1.0, gt=0, description="how often a live event stream looks without a NOTIFY"
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    auth: Literal["keys", "none"] | None = Field(
        default=None,
        description="keys: every request but health needs a bearer key; none: one default "
        "tenant, no keys. Unset means none only for the embedded database on a loopback "
        "address, keys otherwise",
    )
    bad_request_limit: int = Field(default=100, ge=1, description="bad requests per window")
    bad_request_window_s: float = Field(default=60.0, gt=0)
    max_concurrent_requests: int = Field(
        default=16,
        ge=0,
        description="requests one server process works on at once; one more is answered 429 "
        "with Retry-After at once instead of waiting. Health, metrics and event streams do "
        "not count. 0 means no limit",
    )
    max_heavy_per_key: int = Field(
        default=1,
        ge=0,
        description="exports (PROV), impact files (/v1/impact/ids) and streamed (NDJSON) impact "
        "answers one key may have in progress at once in one server process; one more is "
        "answered 429 with Retry-After. 0 means no limit",
    )
    max_heavy_per_tenant: int = Field(
        default_factory=lambda: max(1, usable_cpus() // 2),
        ge=0,
        description="the same, for all of one tenant's keys together, so one tenant cannot "
        "fill the process while others wait; unset means half the CPUs the process may run "
        "on, at least 1. 0 means no limit",
    )
    max_event_streams_per_key: int = Field(
        default=16,
        ge=0,
        description="live event streams (/v1/events) one key may hold open at once in one "
        "server process; one more is answered 429 with Retry-After. 0 means no limit",
    )
    max_event_streams_per_tenant: int = Field(
        default=64,
        ge=0,
        description="the same, for all of one tenant's keys together. 0 means no limit",
    )
    log_origin: str = Field(
        default="lineage",
        pattern=r"^[^\s+/][^\s+]*$",
        description="names this deployment's verifiable logs (tenant T's is '<origin>/T') and "
        "its signing key; a schema-less URL such as lineage.example.com is best",
    )
    log_signing_key_file: Path | None = Field(
        default=None,
        description="Ed25519 private key (PEM) that signs checkpoints; unset means "
        "data_dir/log-signing-key.pem, created on first use. Every replica must share it",
    )
    log_interval_s: float = Field(
        default=10.0,
        ge=0,
        description="how often the service integrates appended records into each tenant's "
        "log and signs a checkpoint if it grew; 0 means only on demand",
    )
    log_step_leaves: int = Field(
        default=1000,
        ge=1,
        description="records integrated into a tenant's log per transaction (each holds the "
        "log's lock): the background round drains a backlog in such steps, and a checkpoint "
        "request integrates at most one step, then signs what is integrated",
    )
    retention_schedule: bool = Field(
        default=True,
        description="apply the retention period (`lineage retention set`) every hour and add "
        "the month partitions ahead; off means only `lineage retention apply` does",
    )
    signing_keys_file: Path | None = Field(
        default=None,
        description="HMAC keyring (JSON, mode 0600) that signs each record; unset means "
        "data_dir/signing-keys.json, created on first use. Keep it where the database cannot "
        "reach it; every replica and direct writer must share it",
    )
    vector_stores_file: Path | None = Field(
        default=None,
        description="TOML file (mode 0600) of each tenant's vector stores (pgvector tables, "
        "Qdrant collections), from which forget deletes the vectors of what it forgets; see "
        "docs/privacy.md. Unset means no store is registered",
    )
    vector_store_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="how long forget waits for one vector store before reporting it failed "
        "(running the forget again finishes it)",
    )
    session_secret: SecretStr | None = Field(
        default=None,
        description="signs the explorer's session cookies; unset means random per process, "
        "so set it when several processes serve one address",
    )
    session_ttl_seconds: int = Field(default=3600, ge=60, le=24 * 3600)
    metrics_token: SecretStr | None = Field(
        default=None,
        description="the bearer token a Prometheus scraper sends for /metrics when "
        "LINEAGE_AUTH=keys (the figures span every tenant, so no tenant's key opens them)",
    )
    claim_judge: str = Field(
        default="offline",
        description="the judge verification runs: 'offline' (rules), 'openai' (an "
        "OpenAI-compatible grader at LINEAGE_JUDGE_BASE_URL), or the name of an installed "
        "`lineage.judges` entry point (an operator's NLI model or LLM)",
    )
    judge_base_url: str | None = Field(default=None, description="for claim_judge=openai")
    judge_model: str | None = Field(default=None, description="for claim_judge=openai")
    judge_api_key: SecretStr | None = Field(default=None, description="for claim_judge=openai")
    sample_share: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="the share of new answers and hand-offs verified in the background (0: off)",
    )
    sample_queue: int = Field(
        default=1000, ge=1, description="records waiting for background verification, at most"
    )

    @field_validator("metrics_token", "session_secret", "judge_api_key", mode="before")
    @classmethod
    def empty_secret_is_unset(cls, value: object) -> object:
        """`VAR=` (as compose writes `${VAR:-}`) means unset, never an empty secret."""
        return None if value == "" else value


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def effective_auth(settings: Settings, *, embedded: bool) -> Literal["keys", "none"]:
    if settings.auth is not None:
        return settings.auth
    return "none" if embedded and settings.host in LOOPBACK_HOSTS else "keys"


def load_settings(config_file: Path | None = None) -> Settings:
    """Environment wins over the config file, which wins over the defaults."""
    if config_file is None:
        return Settings()
    return Settings(_env_file=config_file)
