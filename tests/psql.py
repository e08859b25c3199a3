"""psql as a subprocess on a test database, as an operator runs a file from sql/: logged in as
the application role, confined to a tenant with the token `lineage tenant token` prints."""

import asyncio
import os
from pathlib import Path

import asyncpg

from lineage import db


async def run_psql(database_url: str, path: Path, variables: dict[str, str], *options: str) -> str:
    """What psql prints for `path` with these `-v` variables (ON_ERROR_STOP: any error fails)."""
    tenant_id = variables["tenant_id"]
    owner = await asyncpg.connect(database_url)
    try:
        key = await db.fetch_vouching_key(owner)
    finally:
        await owner.close()
    assert key is not None
    settings = (
        f"-c role=lineage_app -c lineage.tenant_id={tenant_id} "
        f"-c lineage.tenant_token={db.tenant_token(key, tenant_id)}"
    )
    arguments = ["psql", database_url, "-X", "-v", "ON_ERROR_STOP=1", *options]
    for name, value in variables.items():
        arguments += ["-v", f"{name}={value}"]
    done = await asyncio.create_subprocess_exec(
        *arguments, "-f", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PGOPTIONS": settings},
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 0, f"{path.name}: {stderr.decode()}"
    return stdout.decode()
