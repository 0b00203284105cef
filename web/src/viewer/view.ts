/** Where the viewer looks: the world point at the canvas centre and CSS pixels per world unit. */
export interface View {
  x: number;
  y: number;
  zoom: number;
}

/** The rectangle of the world a canvas of `width` x `height` CSS pixels shows. */
export function visibleRect(view: View, width: number, height: number) {
  const halfWidth = width / 2 / view.zoom;
  const halfHeight = height / 2 / view.zoom;
  return { x0: view.x - halfWidth, y0: view.y - halfHeight, x1: view.x + halfWidth, y1: view.y + halfHeight };
}

/**
 * The level to draw at `worldPerDevicePx`: the one whose pixel size is nearest to a device
 * pixel's in log scale (the finer of two equally near), so on a pyramid of halvings its pixels
 * span 0.71 to 1.41 device pixels. Not the coarsest level no larger than a device pixel: that
 * reads up to four times the texels the screen shows, and a zoom step waits for every one.
 */
export function levelFor(pixelSizes: readonly number[], worldPerDevicePx: number): number {
  let chosen = 0;
  let best = Number.POSITIVE_INFINITY;
  pixelSizes.forEach((size, k) => {
    const distance = Math.abs(Math.log2(size / worldPerDevicePx));
    // The tolerance keeps a tie (and its rounding) on the finer level.
    if (distance < best - 1e-6) {
      best = distance;
      chosen = k;
    }
  });
  return chosen;
}

/** The world point under a CSS pixel offset from the canvas's top-left corner. */
export function worldAt(view: View, width: number, height: number, px: number, py: number) {
  return { x: view.x + (px - width / 2) / view.zoom, y: view.y + (py - height / 2) / view.zoom };
}

/** Zooms by `factor` keeping the world point under (px, py) where it is. */
export function zoomAbout(
  view: View,
  width: number,
  height: number,
  px: number,
  py: number,
  factor: number,
): View {
  const anchor = worldAt(view, width, height, px, py);
  const zoom = view.zoom * factor;
  return { zoom, x: anchor.x - (px - width / 2) / zoom, y: anchor.y - (py - height / 2) / zoom };
}

/** A point on the canvas, in CSS pixels from its top-left corner. */
export interface Point {
  x: number;
  y: number;
}

/**
 * The view after two fingers moved from `from` to `to`: the world point under their midpoint
 * stays under it as it moves, and the zoom follows their distance.
 */
export function pinchView(
  start: View,
  width: number,
  height: number,
  from: readonly [Point, Point],
  to: readonly [Point, Point],
): View {
  const midpoint = ([a, b]: readonly [Point, Point]) => ({ x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 });
  const span = ([a, b]: readonly [Point, Point]) => Math.hypot(a.x - b.x, a.y - b.y);
  const before = midpoint(from);
  const after = midpoint(to);
  const anchor = worldAt(start, width, height, before.x, before.y);
  const zoom = span(from) > 0 ? start.zoom * (span(to) / span(from)) : start.zoom;
  return { zoom, x: anchor.x - (after.x - width / 2) / zoom, y: anchor.y - (after.y - height / 2) / zoom };
}

/**
 * The view a gesture has reached: the first two pointers down pinch (zoom and pan), one alone
 * pans by how far it moved since the gesture started.
 */
export function gestureView(
  gesture: { view: View; from: Map<number, Point> },
  down: Map<number, Point>,
  width: number,
  height: number,
): View {
  const ids = [...gesture.from.keys()].filter((id) => down.has(id));
  const [a, b] = ids;
  if (a === undefined) return gesture.view;
  if (b === undefined) {
    const { zoom, x, y } = gesture.view;
    const from = gesture.from.get(a)!;
    const to = down.get(a)!;
    return { zoom, x: x - (to.x - from.x) / zoom, y: y - (to.y - from.y) / zoom };
  }
  const pair = (points: Map<number, Point>) => [points.get(a)!, points.get(b)!] as const;
  return pinchView(gesture.view, width, height, pair(gesture.from), pair(down));
}

/** The view that fits a world rectangle into the canvas. */
export function fitView(width: number, height: number, worldWidth: number, worldHeight: number): View {
  const zoom = Math.min(width / worldWidth, height / worldHeight);
  return { x: worldWidth / 2, y: worldHeight / 2, zoom };
}

/** `#view=x,y,zoom`: a view survives a reload and can be linked to. */
export function viewFromHash(hash: string): View | undefined {
  const match = /(?:^#|&)view=([^&]+)/.exec(hash);
  const [x, y, zoom] = (match?.[1] ?? '').split(',').map(Number);
  if (![x, y, zoom].every((n) => Number.isFinite(n)) || !(zoom! > 0)) return undefined;
  return { x: x!, y: y!, zoom: zoom! };
}

export function hashOf(view: View): string {
  const round = (n: number) => Number(n.toPrecision(8));
  return `#view=${round(view.x)},${round(view.y)},${round(view.zoom)}`;
}

/** A scale bar length: 1, 2 or 5 times a power of ten, at most `maxPx` CSS pixels long. */
export function scaleBar(zoom: number, maxPx: number): { length: number; px: number } {
  const most = maxPx / zoom;
  const power = 10 ** Math.floor(Math.log10(most));
  const length = [5, 2, 1].map((step) => step * power).find((candidate) => candidate <= most) ?? power;
  return { length, px: length * zoom };
}
