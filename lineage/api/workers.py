"""`lineage serve --workers N`: N processes serving one port, each building the same app.

uvicorn starts each worker afresh and builds its app from an import string, so the serving
process hands its settings down through the environment: the database it resolved (the
embedded one started once), the address and authentication it decided, one session secret
(a cookie issued by one worker is read by any other) and PROMETHEUS_MULTIPROC_DIR, where each
worker keeps its metrics so that /metrics sums every process's (lineage.core.metrics).
"""

import os
import secrets
import tempfile
from pathlib import Path

from fastapi import FastAPI

from lineage.core.metrics import MULTIPROCESS_DIR
from lineage.settings import Settings, load_settings

WORKER_APP = "lineage.api.workers:worker_app"
CONFIG_FILE = "LINEAGE_SERVE_CONFIG_FILE"  # not a setting: which file the workers read


def worker_environment(settings: Settings, url: str, config: Path | None) -> dict[str, str]:
    """What each worker reads in place of the serving process's own settings."""
    secret = settings.session_secret
    metrics_dir = Path(os.environ.get(MULTIPROCESS_DIR) or tempfile.mkdtemp(prefix="lineage-"))
    for stale in metrics_dir.glob("*.db"):  # an earlier run's counts would be summed in
        stale.unlink()
    return {
        "LINEAGE_DATABASE_URL": url,
        "LINEAGE_HOST": settings.host,
        "LINEAGE_AUTH": settings.auth or "keys",  # decided by serving_settings
        "LINEAGE_SESSION_SECRET": secret.get_secret_value() if secret else secrets.token_hex(32),
        CONFIG_FILE: str(config or ""),
        MULTIPROCESS_DIR: str(metrics_dir),
    }


def worker_app() -> FastAPI:
    """One worker's app, from the environment `worker_environment` made."""
    from lineage.api.app import create_app

    config = os.environ.get(CONFIG_FILE)
    return create_app(load_settings(Path(config) if config else None), migrate_first=True)
