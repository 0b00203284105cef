import {
  fitView,
  gestureView,
  hashOf,
  pinchView,
  scaleBar,
  viewFromHash,
  visibleRect,
  worldAt,
  zoomAbout,
} from '../../../web/src/viewer/view';

describe("the viewer's view arithmetic", () => {
  test('a fitted view shows the whole slide, centred', () => {
    const view = fitView(800, 400, 2000, 500);
    expect(view).toEqual({ x: 1000, y: 250, zoom: 0.4 });
    const rect = visibleRect(view, 800, 400);
    expect(rect.x0).toBeCloseTo(0);
    expect(rect.x1).toBeCloseTo(2000);
    expect(rect.y1 - rect.y0).toBeCloseTo(1000);
  });

  test('zooming about a point keeps the world point under it', () => {
    const view = { x: 500, y: 300, zoom: 2 };
    const before = worldAt(view, 640, 480, 100, 50);
    const after = worldAt(zoomAbout(view, 640, 480, 100, 50, 2), 640, 480, 100, 50);
    expect(after.x).toBeCloseTo(before.x, 9);
    expect(after.y).toBeCloseTo(before.y, 9);
  });

  test('a pinch keeps the world points under the fingers under them and zooms by their spread', () => {
    const view = { x: 500, y: 300, zoom: 2 };
    const from = [
      { x: 200, y: 200 },
      { x: 300, y: 200 },
    ] as const;
    // Spread to twice the distance, about a midpoint moved 40 px right and 10 down.
    const to = [
      { x: 190, y: 210 },
      { x: 390, y: 210 },
    ] as const;
    const after = pinchView(view, 640, 480, from, to);
    expect(after.zoom).toBeCloseTo(4, 9);
    for (const k of [0, 1] as const) {
      const before = worldAt(view, 640, 480, from[k].x, from[k].y);
      const now = worldAt(after, 640, 480, to[k].x, to[k].y);
      expect(now.x).toBeCloseTo(before.x, 9);
      expect(now.y).toBeCloseTo(before.y, 9);
    }
    // Two pointers at one point carry no spread: the zoom stays.
    const together = [from[0], from[0]] as const;
    expect(pinchView(view, 640, 480, together, together)).toEqual(view);
  });

  test('one pointer drags the world with it; a third pointer beside a pinch changes nothing', () => {
    const view = { x: 500, y: 300, zoom: 2 };
    const start = new Map([[7, { x: 100, y: 100 }]]);
    const dragged = gestureView({ view, from: start }, new Map([[7, { x: 160, y: 80 }]]), 640, 480);
    expect(dragged).toEqual({ zoom: 2, x: 470, y: 310 });
    // The world point under the pointer at the start is under it still.
    const before = worldAt(view, 640, 480, 100, 100);
    const after = worldAt(dragged, 640, 480, 160, 80);
    expect(after).toEqual(before);

    const two = new Map([
      [1, { x: 200, y: 200 }],
      [2, { x: 300, y: 200 }],
    ]);
    const spread = new Map([
      [1, { x: 150, y: 200 }],
      [2, { x: 350, y: 200 }],
    ]);
    const pinched = gestureView({ view, from: two }, spread, 640, 480);
    expect(pinched).toEqual(
      pinchView(view, 640, 480, [two.get(1)!, two.get(2)!], [spread.get(1)!, spread.get(2)!]),
    );
    const withThird = new Map([...spread, [3, { x: 10, y: 10 }]]);
    expect(gestureView({ view, from: new Map([...two, [3, { x: 0, y: 0 }]]) }, withThird, 640, 480)).toEqual(
      pinched,
    );
    // Every pointer of the gesture lifted: the view it started from.
    expect(gestureView({ view, from: two }, new Map(), 640, 480)).toEqual(view);
  });

  test('the view survives the address; anything else there is ignored', () => {
    const view = { x: 1234.5, y: 99.25, zoom: 2.004 };
    expect(viewFromHash(hashOf(view))).toEqual(view);
    expect(viewFromHash('#other=1&view=1,2,3')).toEqual({ x: 1, y: 2, zoom: 3 });
    expect(viewFromHash('#view=1,2,0')).toBeUndefined();
    expect(viewFromHash('#view=a,b,c')).toBeUndefined();
    expect(viewFromHash('')).toBeUndefined();
  });

  test('the scale bar is 1, 2 or 5 times a power of ten and no longer than asked', () => {
    expect(scaleBar(2, 120)).toEqual({ length: 50, px: 100 });
    expect(scaleBar(0.01, 120)).toEqual({ length: 10_000, px: 100 });
    expect(scaleBar(30, 120)).toEqual({ length: 2, px: 60 });
    for (const zoom of [0.0007, 0.3, 1, 7.7, 123]) {
      const bar = scaleBar(zoom, 120);
      expect(bar.px).toBeLessThanOrEqual(120);
      expect(bar.px).toBeGreaterThan(120 / 5);
      expect(String(bar.length / 10 ** Math.floor(Math.log10(bar.length)))).toMatch(/^[125]$/);
    }
  });
});
