import type { SpsClient } from '../../../sdk';
import { clearError, h, showError } from '../dom';
import { CellTables } from './cells';
import '../zarr-codecs';
import {
  type ChannelLayer,
  channelLayers,
  heLayer,
  type Layer,
  labelLayer,
  onHePixels,
  publicLayers,
} from './sources';
import { fitView, hashOf, scaleBar, type View, viewFromHash } from './view';
import { type ChannelState, type Scene, Viewer, type ViewerEvents } from './viewer';
import './viewer.css';

type Sample = Awaited<ReturnType<SpsClient['samples']['get']>>;

const hex = (colour: readonly number[]) =>
  `#${colour
    .map((c) =>
      Math.round(c * 255)
        .toString(16)
        .padStart(2, '0'),
    )
    .join('')}`;
const rgbOf = (value: string): [number, number, number] => [
  Number.parseInt(value.slice(1, 3), 16) / 255,
  Number.parseInt(value.slice(3, 5), 16) / 255,
  Number.parseInt(value.slice(5, 7), 16) / 255,
];

function channelControls(channel: ChannelState, redraw: () => void): HTMLElement {
  const name = channel.layer.label;
  const number = (label: string, index: 0 | 1) =>
    h('input', {
      type: 'number',
      min: 0,
      max: 65535,
      step: 1,
      value: Math.round(channel.limits[index]),
      'aria-label': `${name} contrast ${label}`,
      class: 'limit',
      onchange: (event: Event) => {
        const value = Number((event.target as HTMLInputElement).value);
        if (Number.isFinite(value)) channel.limits[index] = value;
        redraw();
      },
    });
  return h(
    'div',
    { class: 'channel', 'data-channel': name },
    h(
      'label',
      // The name may be cut short in a narrow panel: the whole name on hover.
      { class: 'check', title: name },
      h('input', {
        type: 'checkbox',
        checked: channel.visible,
        onchange: (event: Event) => {
          channel.visible = (event.target as HTMLInputElement).checked;
          redraw();
        },
      }),
      ` ${name}`,
    ),
    h('input', {
      type: 'color',
      value: hex(channel.colour),
      'aria-label': `${name} colour`,
      oninput: (event: Event) => {
        channel.colour = rgbOf((event.target as HTMLInputElement).value);
        redraw();
      },
    }),
    number('minimum', 0),
    number('maximum', 1),
  );
}

/** The cell under the cursor: id, area and the marker means from the layer's tables. */
function cellInfo(summary: Awaited<ReturnType<CellTables['cell']>>, unit: string): (HTMLElement | string)[] {
  if (!summary) return ['No cell here.'];
  const entries: [string, string, string][] = [
    ['instance_id', 'Cell', summary.instanceId],
    ['label', 'Label', String(summary.label)],
    ['area_um2', 'Area', `${summary.areaUm2.toFixed(2)} ${unit}²`],
    ...summary.means.map(({ marker, mean }): [string, string, string] => [
      `mean:${marker}`,
      `${marker} mean`,
      mean.toPrecision(4),
    ]),
  ];
  return [
    h(
      'dl',
      { class: 'meta' },
      ...entries.flatMap(([field, term, value]) => [
        h('dt', {}, term),
        h('dd', { 'data-field': field }, value),
      ]),
    ),
  ];
}

/**
 * The cell a click pinned: its details stay while the cursor moves on, until another cell is
 * clicked, the background is clicked or Unpin is pressed. `onChange` gets the pinned label
 * (0: none) for the canvas's tint.
 */
function pinnedPanel(unit: string, onChange: (label: number) => void) {
  const body = h('div', { 'aria-live': 'polite' });
  const panel = h(
    'section',
    { id: 'cell-pinned', class: 'pinned', 'aria-labelledby': 'cell-pinned-title', hidden: true },
    h('h3', { id: 'cell-pinned-title' }, 'Pinned cell'),
    body,
  );
  let current = 0;
  const unpin = h(
    'button',
    {
      type: 'button',
      onclick: () => {
        show(0);
        document.getElementById('viewer-canvas')?.focus();
      },
    },
    'Unpin',
  );
  panel.append(unpin);
  const show = (label: number) => {
    current = label;
    panel.hidden = label === 0;
    onChange(label);
  };
  return {
    panel,
    async pin(label: number, tables: CellTables): Promise<void> {
      show(label);
      if (label === 0) {
        body.replaceChildren();
        return;
      }
      body.replaceChildren(h('p', {}, `Cell ${label}: reading its rows…`));
      const summary = await tables.cell(label);
      if (current === label) body.replaceChildren(...cellInfo(summary, unit));
    },
  };
}

/**
 * The sample's viewer: its H&E, the markers of its completed predictions and its cell outlines
 * in one deep-zoom canvas, with a control per layer, a scale bar, the cursor's position and the
 * cell under it. Loaded by the sample page on demand (its own chunk: the list pages never load
 * it); mounted again, with the view kept in the URL hash, when the page reloads after a job.
 */
export async function mountViewer(section: HTMLElement, sps: SpsClient, sample: Sample): Promise<void> {
  // Mounted again (a new scale) while an earlier mount still loads: only the latest draws.
  const mount = String(Number(section.dataset.mount ?? 0) + 1);
  section.dataset.mount = mount;
  const status = heading(section);
  if (sample.status !== 'ready') {
    section.append(h('p', { class: 'note' }, 'The viewer needs a ready sample.'));
    return;
  }
  try {
    const layer = sample.segmentation.status === 'completed' ? sample.segmentation.layer : null;
    const [he, channels, cells, manifest] = await Promise.all([
      heLayer(sps, sample),
      channelLayers(sps, sample.jobs),
      layer ? labelLayer(sps, sample.id, layer.id) : undefined,
      layer ? sps.segmentation.manifest(sample.id, layer.id) : undefined,
    ]);
    const tables =
      layer && manifest
        ? new CellTables(sps, sample.id, layer.id, manifest.artifacts.cells.markers)
        : undefined;
    await connected(section);
    if (section.dataset.mount !== mount) return;
    const onHe = <T extends Layer>(layer: T) => onHePixels(he.layer, layer);
    build(section, sceneOf(he.layer, channels.map(onHe), cells && onHe(cells)), he.unit, tables);
  } catch (err) {
    showError(err, status);
  }
}

/** The view in the page's address, for a reload or a link. */
function keepInAddress(view: View): void {
  // Whole: the page's <base> would resolve a bare `#view=...` against the app root.
  history.replaceState(null, '', `${location.pathname}${location.search}${hashOf(view)}`);
}

/**
 * The viewer drawn again after the sample's scale changed from `before`: the view in the
 * address is moved into the new units (micrometres, or pixels without a scale), so it shows
 * the same place.
 */
export function mountRescaledViewer(
  section: HTMLElement,
  sps: SpsClient,
  sample: Sample,
  before: number | null,
): Promise<void> {
  const factor = (sample.mpp ?? 1) / (before ?? 1);
  const view = viewFromHash(location.hash);
  if (view) {
    keepInAddress({ x: view.x * factor, y: view.y * factor, zoom: view.zoom / factor });
  }
  return mountViewer(section, sps, sample);
}

/**
 * A public cohort sample's viewer: its H&E and pinned markers, read through the public byte
 * proxy; no cells (the public store serves none).
 */
export async function mountPublicViewer(
  section: HTMLElement,
  sps: SpsClient,
  publicId: string,
): Promise<void> {
  const status = heading(section);
  try {
    const { he, channels } = await publicLayers(sps, publicId);
    await connected(section);
    build(
      section,
      sceneOf(he.layer, channels, undefined),
      he.unit,
      undefined,
      'A public sample shares no cell outlines.',
    );
  } catch (err) {
    showError(err, status);
  }
}

/** The section's heading and the line that shows why the viewer could not open. */
function heading(section: HTMLElement): HTMLElement {
  const status = h('p', { role: 'alert', hidden: true, class: 'field-error' });
  section.replaceChildren(h('h2', { id: 'viewer-title' }, 'Viewer'), status);
  return status;
}

/** Every layer shown; the H&E faint under markers so their colours read. */
function sceneOf(he: Layer, channels: ChannelLayer[], cells: Layer | undefined): Scene {
  return {
    he: { layer: he, visible: true, opacity: channels.length > 0 ? 0.35 : 1 },
    channels: channels.map((c) => ({
      layer: c,
      visible: true,
      colour: c.color,
      limits: [c.window.start, c.window.end],
    })),
    cells: cells && { layer: cells, outlines: false, selected: 0, pinned: 0 },
  };
}

/** The sample page attaches its sections when all are made: the canvas is measured once it is. */
async function connected(section: HTMLElement): Promise<void> {
  while (!section.isConnected) await new Promise((resolve) => requestAnimationFrame(resolve));
}

function build(
  section: HTMLElement,
  scene: Scene,
  unit: string,
  tables: CellTables | undefined,
  noCells = 'No completed segmentation: no cell outlines.',
): void {
  const canvas = h('canvas', {
    id: 'viewer-canvas',
    tabindex: 0,
    'aria-label':
      'Slide viewer: drag to pan, pinch, wheel or + and - to zoom, arrow keys to move, click or tap a cell (or Enter for the one at the centre) to pin its details',
  });
  const bar = h('span', { class: 'bar' });
  const barText = h('span', { id: 'viewer-scale-text' });
  const cursor = h('output', { id: 'viewer-cursor', 'aria-live': 'off' }, '—');
  const info = h('div', { id: 'cell-info', 'aria-live': 'polite' });
  const error = h('p', { id: 'viewer-error', role: 'alert', hidden: true, class: 'field-error' });
  let hovered = 0;
  let viewer: Viewer | undefined;
  const redraw = () => viewer?.redraw();
  const pinned = pinnedPanel(unit, (label) => {
    if (scene.cells) scene.cells.pinned = label;
    redraw();
  });
  const events: ViewerEvents = {
    onView(view) {
      keepInAddress(view);
      const scale = scaleBar(view.zoom, 120);
      bar.style.width = `${scale.px}px`;
      barText.textContent = `${scale.length} ${unit}`;
    },
    onPointer(world) {
      cursor.textContent = world ? `x ${world.x.toFixed(1)} ${unit}, y ${world.y.toFixed(1)} ${unit}` : '—';
      if (!scene.cells || !tables) return;
      const label = world ? (viewer?.labelAt(world) ?? 0) : 0;
      if (label === hovered) return;
      hovered = label;
      scene.cells.selected = label;
      redraw();
      if (label === 0) {
        info.replaceChildren();
        return;
      }
      tables
        .cell(label)
        .then((summary) => {
          if (hovered === label) info.replaceChildren(...cellInfo(summary, unit));
        })
        .catch((err) => showError(err, error));
    },
    onPick(world) {
      if (!scene.cells || !tables || !viewer) return;
      pinned.pin(viewer.labelAt(world), tables).catch((err) => showError(err, error));
    },
    onError(err) {
      // The console gets the cause too (zarrita wraps a codec's own error).
      console.error(String(err), String((err as { cause?: unknown }).cause ?? ''));
      showError(err, error);
    },
    onRecover() {
      clearError(error);
    },
  };
  const zoomButton = (label: string, text: string, act: () => void) => {
    const button = h('button', { type: 'button', 'aria-label': label, title: label }, text);
    button.addEventListener('click', act);
    return button;
  };
  const zoomButtons = h(
    'div',
    { class: 'viewer-zoom', role: 'group', 'aria-label': 'Zoom' },
    zoomButton('Zoom in', '+', () => viewer?.zoomBy(1)),
    zoomButton('Zoom out', '−', () => viewer?.zoomBy(-1)),
    zoomButton('Fit the whole slide', 'Fit', () => viewer?.setView(whole())),
  );
  const controls = h(
    'fieldset',
    { class: 'viewer-layers' },
    h('legend', {}, 'Layers'),
    h(
      'div',
      { class: 'channel', 'data-channel': 'H&E' },
      h(
        'label',
        { class: 'check' },
        h('input', {
          type: 'checkbox',
          checked: scene.he.visible,
          onchange: (event: Event) => {
            scene.he.visible = (event.target as HTMLInputElement).checked;
            redraw();
          },
        }),
        ' H&E',
      ),
      h('input', {
        type: 'range',
        min: 0,
        max: 1,
        step: 0.05,
        value: scene.he.opacity,
        'aria-label': 'H&E opacity',
        oninput: (event: Event) => {
          scene.he.opacity = Number((event.target as HTMLInputElement).value);
          redraw();
        },
      }),
    ),
    ...scene.channels.map((channel) => channelControls(channel, redraw)),
    scene.cells
      ? h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            id: 'viewer-outlines',
            onchange: (event: Event) => {
              scene.cells!.outlines = (event.target as HTMLInputElement).checked;
              redraw();
            },
          }),
          ' Cell outlines',
        )
      : h('p', { class: 'note' }, noCells),
  );
  const stage = h(
    'div',
    { class: 'viewer-stage' },
    canvas,
    zoomButtons,
    h('div', { class: 'viewer-scale', id: 'viewer-scale' }, bar, barText),
  );
  const side = h(
    'div',
    { class: 'viewer-side' },
    controls,
    h('p', {}, 'Cursor: ', cursor),
    info,
    pinned.panel,
    error,
  );
  const root = h('div', { class: 'viewer' }, stage, side);
  stage.append(fullScreenButton(root));
  section.append(root);
  // Sized by the stylesheet: the first view fits the slide to the canvas as laid out.
  const level0 = scene.he.layer.levels[0]!;
  const whole = () =>
    fitView(
      canvas.clientWidth,
      canvas.clientHeight,
      level0.width * level0.pixelSize,
      level0.height * level0.pixelSize,
    );
  const initial: View = viewFromHash(location.hash) ?? whole();
  viewer = new Viewer(canvas, scene, initial, events);
  viewer.setView(initial);
}

/**
 * A button that shows `root` (the viewer with its layers and cell panels) on the whole screen
 * and back; Escape leaves too. It says which state holds (`aria-pressed`).
 */
function fullScreenButton(root: HTMLElement): HTMLButtonElement {
  const button = h(
    'button',
    { type: 'button', class: 'viewer-full-screen', 'aria-pressed': 'false' },
    'Full screen',
  );
  button.addEventListener('click', () => {
    if (document.fullscreenElement === root) void document.exitFullscreen();
    // Refused without a user's gesture or where a frame forbids it: the button stays unpressed.
    else root.requestFullscreen().catch(() => undefined);
  });
  // On the document: a change is told there when the element left the page (a re-render).
  const changed = () => {
    if (!root.isConnected) document.removeEventListener('fullscreenchange', changed);
    button.setAttribute('aria-pressed', String(document.fullscreenElement === root));
  };
  document.addEventListener('fullscreenchange', changed);
  return button;
}
