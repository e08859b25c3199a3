"""The explorer at /ui: a static page (lineage/ui/) shipped inside the package that reads
everything through the API: the marks it draws are the service's (sql/suspicious_hops.sql),
never the browser's guess. Its sign-in is routes/login.py; its blast radii by page and as a file
of ids are routes/impact.py."""

from importlib.resources import files
from pathlib import PurePosixPath

from fastapi import APIRouter
from fastapi.responses import Response

from lineage.core.errors import NotFound

router = APIRouter(tags=["explorer"])

ASSETS = files("lineage.ui")
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
# The page loads nothing from elsewhere and runs no inline script.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> Response:
    suffix = PurePosixPath(name).suffix
    resource = ASSETS.joinpath(name)
    if suffix not in MEDIA_TYPES or not resource.is_file():
        raise NotFound(f"the explorer has no file {name}")
    return Response(resource.read_bytes(), media_type=MEDIA_TYPES[suffix], headers=PAGE_HEADERS)


@router.get("/ui", include_in_schema=False)
async def explorer() -> Response:
    return _asset("index.html")


@router.get("/ui/{name}", include_in_schema=False)
async def explorer_file(name: str) -> Response:
    return _asset(name)


@router.get("/ui/vendor/{name}", include_in_schema=False)
async def explorer_vendored_file(name: str) -> Response:
    """The layout library and its licence (lineage/ui/vendor/README.md says whence)."""
    return _asset(f"vendor/{name}")
