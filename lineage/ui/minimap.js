// The minimap of a graph that outgrew its frame: every box as a patch of its kind's colour
// (red when it holds marked records), the part in the frame outlined; a click or a drag on it
// centres the frame there.

import { el } from "./dom.js";

const WIDTH = 200;
const HEIGHT = 130;

export class Minimap {
  // moveTo(x, y): centre the frame on that point of the graph.
  constructor(moveTo) {
    this.canvas = el("canvas", { className: "minimap", width: WIDTH, height: HEIGHT,
      "aria-label": "minimap: click to move the view", hidden: true });
    this.scale = 1;
    let dragging = false;
    const follow = (event) => {
      const bounds = this.canvas.getBoundingClientRect();
      moveTo((event.clientX - bounds.left) / this.scale, (event.clientY - bounds.top) / this.scale);
    };
    this.canvas.addEventListener("pointerdown", (event) => {
      dragging = true;
      this.canvas.setPointerCapture(event.pointerId);
      follow(event);
    });
    this.canvas.addEventListener("pointermove", (event) => {
      if (dragging) follow(event);
    });
    this.canvas.addEventListener("pointerup", () => {
      dragging = false;
    });
  }

  // size: the graph's; patches: [{x, y, width, height, paint, faded}] in its coordinates;
  // shown: {x, y, width, height}, the part of it in the frame. Hidden while all of it is shown.
  paint(size, patches, shown) {
    const outgrown = shown.x > 1 || shown.y > 1 || shown.width < size.width - 1 ||
      shown.height < size.height - 1;
    this.canvas.hidden = !outgrown;
    if (!outgrown) return;
    const s = Math.min(WIDTH / size.width, HEIGHT / size.height);
    this.scale = s;
    const context = this.canvas.getContext("2d");
    context.clearRect(0, 0, WIDTH, HEIGHT);
    for (const patch of patches) {
      context.fillStyle = patch.paint;
      context.globalAlpha = patch.faded ? 0.3 : 0.9;
      context.fillRect(patch.x * s, patch.y * s, Math.max(2, patch.width * s),
        Math.max(2, patch.height * s));
    }
    context.globalAlpha = 1;
    context.strokeStyle = "#1d4ed8";
    context.lineWidth = 2;
    context.strokeRect(shown.x * s, shown.y * s, shown.width * s, shown.height * s);
  }
}
