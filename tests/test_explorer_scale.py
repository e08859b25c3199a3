"""The explorer at real sizes, in a real Chromium against `lineage serve`: walk-backs of 10, 300
and 3,000 records appended through the store (documents, their chunks, summaries, retrievals,
a prompt, claims, an answer; an old chunker and a revised document for marks) must draw boxes
that all lie in the frame, never overlap and carry labels of at least 11 px, with the marks
grouped; finding a record, a mark group's path, opening a group and zooming out keep that true;
a document's blast radius of the same sizes too. Screenshots and the render times measured in
the page go to test-artifacts/ (or $LINEAGE_UI_ARTIFACTS)."""

import math
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from lineage.core.derive import Derivation, derive_many
from lineage.store.postgres import PostgresStore
from tests.browser import lineage_serve, offline_page

# Starts servers and browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

CHUNKS_PER_RETRIEVAL = 200  # a retrieval's fan-in; a record has at most 1,000 parents
LEGIBLE_PX = 11
SHORTEST_BOX_PX = 16
MOST_BOXES = 40  # a folded walk's first draw, whatever its size


def source_uri(size: int, document: int) -> str:
    return f"s3://corpus-{size}/doc-{document}.md"


async def load_incident_walk(store: PostgresStore, size: int) -> str:
    """An incident whose walk-back holds `size` records (at least 10): documents, their chunks
    (half of them from the first document; every seventh made by the old chunker@1.4), a summary
    of each document's first chunks, the question, retrievals of 200 chunks each, a prompt over
    the retrievals and summaries, claims over the prompt and the answer over the claims. Then the
    first document is revised after the index snapshot: its old revision and its chunks are
    marked. Returns the answer's id."""
    at = f"w{size}"
    documents = max(1, size // 75)
    claims = 3 if size >= 50 else 1
    fixed = 2 * documents + 1 + 1 + claims + 1  # documents, summaries, query, prompt, …, answer
    retrievals = 1
    while math.ceil((size - fixed - retrievals) / CHUNKS_PER_RETRIEVAL) > retrievals:
        retrievals += 1
    chunks = size - fixed - retrievals

    def document_of(chunk: int) -> int:
        return 0 if documents == 1 or chunk % 2 == 0 else 1 + (chunk // 2) % (documents - 1)

    items = [Derivation([], f"{at} document {d}", "document", "loader", "1",
                        source_uri=source_uri(size, d), context_id=f"{at}_doc_{d}")
             for d in range(documents)]  # fmt: skip
    items += [Derivation([f"{at}_doc_{document_of(c)}"], f"{at} chunk {c}", "chunk", "chunker",
                         "1.4" if c % 7 == 1 else "2.3.1", index_snapshot=f"idx_{at}",
                         context_id=f"{at}_chunk_{c}") for c in range(chunks)]  # fmt: skip
    firsts: dict[int, list[str]] = {}
    for c in range(chunks):
        firsts.setdefault(document_of(c), []).append(f"{at}_chunk_{c}")
    items += [Derivation(firsts.get(d, [])[:20] or [f"{at}_doc_{d}"], f"{at} summary {d}",
                         "summary", "summarise", "2", produced_by="agent/summarise@v2",
                         context_id=f"{at}_summary_{d}") for d in range(documents)]  # fmt: skip
    items.append(Derivation([], f"{at}: what notice do contractors get?", "query",
                            source_uri=f"chat://{at}", context_id=f"{at}_query"))  # fmt: skip
    items += [Derivation([f"{at}_query", *(f"{at}_chunk_{c}" for c in range(
                  r * CHUNKS_PER_RETRIEVAL, min(chunks, (r + 1) * CHUNKS_PER_RETRIEVAL)))],
                         f"{at} retrieval {r}", "retrieval", "retriever", "3",
                         index_snapshot=f"idx_{at}", context_id=f"{at}_retrieval_{r}")
              for r in range(retrievals)]  # fmt: skip
    items.append(Derivation([f"{at}_query", *(f"{at}_retrieval_{r}" for r in range(retrievals)),
                             *(f"{at}_summary_{d}" for d in range(documents))],
                            f"{at} prompt", "prompt", "prompt", "1",
                            context_id=f"{at}_prompt"))  # fmt: skip
    items += [Derivation([f"{at}_prompt"], f"{at} claim {c}", "claim", "answer", "1",
                         produced_by="agent/answer@v3", context_id=f"{at}_claim_{c}")
              for c in range(claims)]  # fmt: skip
    items.append(Derivation([f"{at}_claim_{c}" for c in range(claims)], f"{at} answer",
                            "answer", "answer", "1", produced_by="agent/answer@v3",
                            context_id=f"{at}_answer"))  # fmt: skip
    assert len(items) == size
    await derive_many(store, items)
    await derive_many(store, [Derivation([], f"{at} document 0, revised", "document", "loader",
                                         "1", source_uri=source_uri(size, 0),
                                         context_id=f"{at}_doc_0_v2")])  # fmt: skip
    return f"{at}_answer"


@pytest.fixture
async def served(database_url: str, tmp_path: Path) -> AsyncIterator[str]:
    with lineage_serve(database_url, tmp_path, auth="none") as url:
        yield url


# What a reader sees of the boxes drawn in `frame` (CSS pixels, as rendered): each box's
# rectangle, the smallest rendered font of its labels, and which boxes lie outside the frame,
# overlap another, are shorter than 16 px or carry a label under 11 px.
GEOMETRY = """([frameSelector, boxSelector, shapeSelector, shortest, legible]) => {
  const frame = document.querySelector(frameSelector).getBoundingClientRect();
  const boxes = [...document.querySelectorAll(boxSelector)].map((node) => {
    const r = node.querySelector(shapeSelector).getBoundingClientRect();
    const fonts = [...node.querySelectorAll("text")].map((text) =>
      parseFloat(getComputedStyle(text).fontSize) * text.getScreenCTM().a);
    return { id: node.dataset.id || `${node.dataset.depth}:${node.dataset.kind}`,
             left: r.left, top: r.top, right: r.right, bottom: r.bottom, height: r.height,
             font: Math.min(...fonts) };
  });
  const outside = boxes.filter((b) => b.left < frame.left - 1 || b.right > frame.right + 1 ||
    b.top < frame.top - 1 || b.bottom > frame.bottom + 1).map((b) => b.id);
  const overlapping = [];
  for (let i = 0; i < boxes.length; i += 1) {
    for (let j = i + 1; j < boxes.length; j += 1) {
      const a = boxes[i];
      const b = boxes[j];
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 &&
          b.top < a.bottom - 1) overlapping.push(`${a.id} / ${b.id}`);
    }
  }
  return { count: boxes.length, outside, overlapping,
           short: boxes.filter((b) => b.height < shortest).map((b) => b.id),
           illegible: boxes.filter((b) => b.font < legible).map((b) => `${b.id} ${b.font}`),
           smallestFont: Math.min(...boxes.map((b) => b.font)),
           shortestBox: Math.min(...boxes.map((b) => b.height)) };
}"""


async def readable(page: Page, frame: str, boxes: str, shape: str, in_frame: bool = True) -> Any:
    """The boxes' geometry, asserted: legible, tall enough, apart, and (unless the reader has
    opened more than fits) all inside the frame."""
    seen = await page.evaluate(GEOMETRY, [frame, boxes, shape, SHORTEST_BOX_PX, LEGIBLE_PX])
    assert seen["count"] > 0, seen
    assert seen["overlapping"] == [], seen["overlapping"][:10]
    assert seen["short"] == [], seen["short"][:10]
    assert seen["illegible"] == [], seen["illegible"][:10]
    if in_frame:
        assert seen["outside"] == [], seen["outside"][:10]
    return seen


WALK_BOXES = ("#graph", "#graph .node", "rect.box:not(.stack)")


async def check_marks(page: Page, hops: list[dict[str, Any]]) -> None:
    """One row per reason, one button per kind and depth, the counts adding up to the hops."""
    reasons = {hop["reason"] for hop in hops}
    await expect(page.locator("#suspicious .mark-groups > li")).to_have_count(len(reasons))
    groups = {(hop["reason"], hop["kind"], hop["depth"]) for hop in hops}
    buttons = page.locator("#suspicious .mark-group")
    await expect(buttons).to_have_count(len(groups))
    counts = [int(await b.get_attribute("data-count") or 0) for b in await buttons.all()]
    assert sum(counts) == len(hops)


async def check_mark_path(page: Page, answer: str) -> None:
    """The largest mark group chosen: the path from its hops up to the answer highlighted."""
    await page.locator("#suspicious .mark-group").first.click()
    await expect(page.locator("#graph svg")).to_have_class("graph-svg path-shown")
    await expect(page.locator(f"#graph .node.on-path[data-id='{answer}']")).to_have_count(1)
    await expect(page.locator("#mark-detail button[data-id]").first).to_be_visible()
    await readable(page, *WALK_BOXES)


async def check_find(page: Page, chunk: str) -> None:
    """A chunk folded deep in a group, found: in a box of its own, shown, on the path."""
    await page.fill("#graph-find", chunk)
    await expect(page.locator(f".graph-findings button[data-id='{chunk}']")).to_be_visible()
    await page.press("#graph-find", "Enter")
    found = page.locator(f"#graph .node[data-id='{chunk}']")
    await expect(found).to_have_class(re.compile(r"\bselected\b"))
    await expect(found).to_have_class(re.compile(r"\bon-path\b"))
    await expect(page.locator("#record h2")).to_have_text(chunk)
    on_path = int(await page.locator("#graph svg").get_attribute("data-path-boxes") or 0)
    assert on_path >= 5, on_path  # chunk, retrieval, prompt, claim, answer
    await readable(page, *WALK_BOXES)


async def check_opening(page: Page, screenshot: Path) -> str:
    """Open the chunks a step, then a document's chunks: the frame outgrown, the minimap shown,
    every box still legible and apart, also zoomed out as far as it goes."""
    await page.click("button[data-fold='reset']")
    folded = await readable(page, *WALK_BOXES)
    chunks = page.locator("#graph .node.group[data-kind='chunk']")
    await chunks.first.dispatch_event("click")
    opened = await readable(page, *WALK_BOXES, in_frame=False)
    assert opened["count"] > folded["count"], (folded, opened)
    drawn = (f"chunks opened a step: {opened['count']} boxes, render "
             f"{await page.locator('#graph svg').get_attribute('data-render-ms')} ms")  # fmt: skip
    await page.locator(".graph").screenshot(path=screenshot)
    await chunks.and_(page.locator("[data-level='1']")).first.dispatch_event("click")
    more = await readable(page, *WALK_BOXES, in_frame=False)
    assert more["count"] > opened["count"], (opened, more)
    assert await page.locator("#graph .node[data-kind='chunk']:not(.group)").count() >= 12
    bounds = await page.locator("#graph").bounding_box()
    assert bounds is not None
    await page.mouse.move(bounds["x"] + bounds["width"] / 2, bounds["y"] + 100)
    for _ in range(10):
        await page.mouse.wheel(0, 400)
    assert float(await page.locator("#graph").get_attribute("data-scale") or 0) >= 0.9
    await readable(page, *WALK_BOXES, in_frame=False)
    await expect(page.locator(".graph .minimap")).to_be_visible()
    await page.click("button[data-fold='reset']")
    await readable(page, *WALK_BOXES)
    return drawn


@pytest.mark.parametrize("size", [10, 300, 3000])
async def test_a_walk_back_reads_at_every_size(
    size: int, store: PostgresStore, client: httpx.AsyncClient, served: str, chromium: str,
    artifacts: Path,
) -> None:  # fmt: skip
    answer = await load_incident_walk(store, size)
    walk = (await client.get(f"/v1/contexts/{answer}/lineage")).json()
    assert len(walk["nodes"]) == size
    hops = (await client.get(f"/v1/contexts/{answer}/suspicious")).json()["hops"]
    reasons = {hop["reason"] for hop in hops}
    assert {"old_transform_version", "snapshot_predates_revision", "source_changed"} <= reasons
    errors: list[str] = []
    report: list[str] = []
    async with offline_page(chromium, served, errors, height=1000) as page:
        await page.goto(f"{served}?walk={answer}")
        svg = page.locator("#graph svg")
        await expect(svg).to_have_attribute("data-records", str(size))
        await expect(page.locator("#graph")).to_have_attribute("data-painted-ms", re.compile(r"\d"))
        first = await readable(page, *WALK_BOXES)
        # What keeps the first draw fast at any size: a bounded number of boxes (the render time
        # itself is reported, not asserted; it depends on the machine's load).
        assert first["count"] <= MOST_BOXES, first
        render_ms = await svg.get_attribute("data-render-ms")
        painted_ms = await page.locator("#graph").get_attribute("data-painted-ms")
        report.append(f"{size} records: {first['count']} boxes, render {render_ms} ms, "
                      f"painted {painted_ms} ms, smallest label {first['smallestFont']:.1f} px, "
                      f"shortest box {first['shortestBox']:.0f} px")  # fmt: skip
        # Every record is drawn or counted in a group, the answer in a box of its own.
        counted = await page.evaluate("""() => [...document.querySelectorAll("#graph .node")]
            .reduce((n, node) => n + Number(node.dataset.count || 1), 0)""")
        assert counted == size
        await expect(page.locator(f"#graph .node[data-id='{answer}']")).to_have_count(1)
        if size == 10:
            await expect(page.locator("#graph .node.group")).to_have_count(0)
        await check_marks(page, hops)
        await page.screenshot(path=artifacts / f"walk-{size}.png", full_page=True)
        await check_mark_path(page, answer)
        await page.screenshot(path=artifacts / f"walk-{size}-mark-path.png", full_page=True)
        await check_find(page, f"w{size}_chunk_{(size // 3) | 1}" if size > 10 else "w10_chunk_2")
        if size >= 300:
            opened = await check_opening(page, artifacts / f"walk-{size}-opened.png")
            report.append(f"{size} records, {opened}")
    (artifacts / f"walk-{size}-timings.txt").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    assert errors == [], errors


@pytest.mark.parametrize("size", [10, 300, 3000])
async def test_a_documents_blast_radius_reads_at_every_size(
    size: int, store: PostgresStore, client: httpx.AsyncClient, served: str, chromium: str,
    artifacts: Path,
) -> None:  # fmt: skip
    # Half a bigger incident's chunks come from its first document: twice the size, for a
    # radius of about `size` records (the smallest has one document, all of it in the radius).
    walk_size = size if size <= 10 else 2 * size
    await load_incident_walk(store, walk_size)
    first = source_uri(walk_size, 0)
    radius = (await client.get("/v1/impact/page", params={"source_uri": first})).json()
    assert size * 0.9 <= radius["summary"]["total"] <= size * 1.2
    errors: list[str] = []
    async with offline_page(chromium, served, errors, height=1000) as page:
        await page.goto(f"{served}?source={first}")
        await expect(page.locator("#counts")).to_contain_text(
            f"{radius['summary']['total']:,} records"
        )
        seen = await readable(page, "#radius-graph", "#radius-graph .layer-box", "rect.box")
        drawn = await page.evaluate("""() => [...document.querySelectorAll(
            "#radius-graph .layer-box")].reduce((n, box) => n + Number(box.dataset.count), 0)""")
        assert drawn == radius["summary"]["total"]
        render_ms = await page.locator("#radius-graph svg").get_attribute("data-render-ms")
        await expect(page.locator("#listing tbody tr")).to_have_count(1)  # the one answer
        await page.screenshot(path=artifacts / f"radius-{size}.png", full_page=True)
    line = (f"blast radius of {first}: {radius['summary']['total']} records, {seen['count']} "
            f"boxes, render {render_ms} ms")  # fmt: skip
    (artifacts / f"radius-{size}-timings.txt").write_text(line + "\n")
    print(line)
    assert errors == [], errors
