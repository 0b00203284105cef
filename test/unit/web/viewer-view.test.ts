import {
  fitView,
  hashOf,
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
