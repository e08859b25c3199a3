"""The API's documentation pages, /docs (Swagger UI) and /redoc, with their scripts and styles
served from the fastapi-offline package: they render on a machine with no network."""

from importlib.resources import files
from pathlib import PurePosixPath

from fastapi import APIRouter, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, Response

from lineage.core.errors import NotFound

router = APIRouter(include_in_schema=False)

ASSETS = files("fastapi_offline").joinpath("static")
ASSET_PREFIX = "/docs/assets"
MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
}
OAUTH2_REDIRECT = "/docs/oauth2-redirect"


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", ""))


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_swagger_ui_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - Swagger UI",
        oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT}",
        swagger_js_url=f"{root}{ASSET_PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSET_PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSET_PREFIX}/favicon.png",
    )


@router.get(OAUTH2_REDIRECT)
async def swagger_ui_oauth2_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    root = _root(request)
    return get_redoc_html(
        openapi_url=f"{root}{request.app.openapi_url}",
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{root}{ASSET_PREFIX}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{ASSET_PREFIX}/favicon.png",
        with_google_fonts=False,
    )


@router.get(ASSET_PREFIX + "/{name}")
async def docs_asset(name: str) -> Response:
    suffix = PurePosixPath(name).suffix
    resource = ASSETS.joinpath(name)
    if suffix not in MEDIA_TYPES or not resource.is_file():
        raise NotFound(f"the documentation pages have no file {name}")
    return Response(
        resource.read_bytes(),
        media_type=MEDIA_TYPES[suffix],
        headers={"Cache-Control": "public, max-age=86400"},
    )
