"""/docs and /redoc render in a real Chromium that can reach nothing but the service: their
scripts and styles come from the installed fastapi-offline package, not a CDN."""

from pathlib import Path

import httpx
import pytest
from playwright.async_api import expect

from tests.browser import lineage_serve, offline_page

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

REDOCLY_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


async def test_the_docs_assets_are_served_by_the_service(client: httpx.AsyncClient) -> None:
    for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = (await client.get(page)).text
        assert f"/docs/assets/{asset}" in html
        assert "cdn." not in html and "fonts.googleapis" not in html, html
        served = await client.get(f"/docs/assets/{asset}")
        assert served.status_code == 200
        assert served.headers["content-type"].startswith("text/javascript")
    for missing in ("/docs/assets/nothing.js", "/docs/assets/__init__.py"):
        assert (await client.get(missing)).status_code == 404, missing


async def test_docs_and_redoc_render_with_the_network_blocked(
    database_url: str, chromium: str, artifacts: Path, tmp_path: Path
) -> None:
    errors: list[str] = []
    with lineage_serve(database_url, tmp_path) as url:
        base = url.removesuffix("/ui")
        async with offline_page(chromium, url, errors) as page:
            await page.goto(f"{base}/docs")
            # Swagger UI draws one block per operation from /openapi.json.
            await expect(page.locator(".swagger-ui .info .title")).to_contain_text("lineage")
            await expect(page.locator(".opblock-summary-path", has_text="/v1/impact/page")
                         ).to_have_count(1)  # fmt: skip
            await page.screenshot(path=artifacts / "docs.png")

            await page.goto(f"{base}/redoc")
            await expect(page.locator("h1", has_text="lineage")).to_be_visible()
            await expect(page.get_by_text("/v1/impact/page").first).to_be_attached()
            await page.screenshot(path=artifacts / "redoc.png")
    # ReDoc's "API docs by Redocly" footer links its logo from the vendor: an image, not a part.
    assert [e for e in errors if e != f"blocked image {REDOCLY_LOGO}"] == [], errors
