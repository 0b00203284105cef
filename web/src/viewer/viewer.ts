import { blendFor, createPrograms, type Program } from './render';
import type { ChannelLayer, Layer, Level } from './sources';
import { type Tile, type TileAddress, TileCache } from './tiles';
import { gestureView, levelFor, type Point, type View, visibleRect, worldAt, zoomAbout } from './view';

export interface ChannelState {
  layer: ChannelLayer;
  visible: boolean;
  colour: [number, number, number];
  /** Contrast limits in stored units. */
  limits: [number, number];
}

/** What is drawn and how: the viewer's controls change these and ask for a frame. */
export interface Scene {
  he: { layer: Layer; visible: boolean; opacity: number };
  channels: ChannelState[];
  /** `selected`: the cell under the cursor; `pinned`: the cell clicked (0: none). */
  cells?: { layer: Layer; outlines: boolean; selected: number; pinned: number };
}

export interface ViewerEvents {
  onView(view: View): void;
  onPointer(world: { x: number; y: number } | null): void;
  /** A click that did not drag, or Enter (the view's centre). */
  onPick(world: { x: number; y: number }): void;
  onError(err: unknown): void;
  /** A chunk arrived after one failed (the network is back): what `onError` said is past. */
  onRecover(): void;
}

interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

type WorldRect = ReturnType<typeof visibleRect>;

/** `rect` grown (or, with negative margins, shrunk) by a fraction of its size on every side. */
function around(rect: WorldRect, fraction: number): WorldRect {
  const dx = (rect.x1 - rect.x0) * fraction;
  const dy = (rect.y1 - rect.y0) * fraction;
  return { x0: rect.x0 - dx, y0: rect.y0 - dy, x1: rect.x1 + dx, y1: rect.y1 + dy };
}

/** The chunks of level `k` of `layer` that meet `rect`, row by row. */
function chunksIn(layer: Layer, k: number, rect: WorldRect): TileAddress[] {
  const level = layer.levels[k]!;
  const spanX = level.chunkWidth * level.pixelSize;
  const spanY = level.chunkHeight * level.pixelSize;
  const x0 = Math.max(0, Math.floor(rect.x0 / spanX));
  const y0 = Math.max(0, Math.floor(rect.y0 / spanY));
  const x1 = Math.min(Math.ceil(level.width / level.chunkWidth) - 1, Math.floor(rect.x1 / spanX));
  const y1 = Math.min(Math.ceil(level.height / level.chunkHeight) - 1, Math.floor(rect.y1 / spanY));
  const chunks: TileAddress[] = [];
  for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) chunks.push({ layer, level: k, x, y });
  return chunks;
}

/**
 * What a settled view may ask for next, most likely first: the next finer level of its central
 * half (a zoom step in), a quarter view around it (a pan), the next coarser level of twice its
 * size (a zoom step out).
 */
function aheadOf(layers: { layer: Layer; level: number }[], rect: WorldRect): TileAddress[] {
  const finer = layers.flatMap(({ layer, level }) =>
    level > 0 ? chunksIn(layer, level - 1, around(rect, -0.25)) : [],
  );
  const ring = layers.flatMap(({ layer, level }) => chunksIn(layer, level, around(rect, 0.25)));
  const coarser = layers.flatMap(({ layer, level }) =>
    level + 1 < layer.levels.length ? chunksIn(layer, level + 1, around(rect, 0.5)) : [],
  );
  return [...finer, ...ring, ...coarser];
}

/**
 * While a view's chunks arrive, a frame that only swaps stand-ins for their chunks is drawn at
 * most this often; the frame that completes the view is drawn at once. Each frame draws every
 * layer (in software, in a headless browser), so frequent ones take the cores the fetching
 * and decoding of the rest need: a zoom step is rarely longer than a frame or two of this.
 */
const LOADING_FRAME_MS = 300;
/** What one zoom step (a key, a button) multiplies the zoom by. */
const ZOOM_STEP = 2;

function validSize(level: Level, x: number, y: number) {
  return {
    width: Math.min(level.chunkWidth, level.width - x * level.chunkWidth),
    height: Math.min(level.chunkHeight, level.height - y * level.chunkHeight),
  };
}

/**
 * Deep zoom over the layers of a `Scene` on one WebGL2 canvas: each layer at the level that
 * matches the zoom, chunk by chunk, a coarser chunk already loaded standing in for one still
 * on its way. The canvas carries `data-state="complete"` once every chunk in view is drawn at
 * its level (`drawing` while a frame is pending, `loading` while chunks are), and fires `viewer-settled` each time a new view gets there.
 */
export class Viewer {
  private readonly gl: WebGL2RenderingContext;
  private readonly programs: ReturnType<typeof createPrograms>;
  private readonly cache: TileCache;
  private scheduled = false;
  private version = 0;
  private settledVersion = -1;
  private destroyed = false;
  private lastFrame = 0;
  private loadingFrame: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly canvas: HTMLCanvasElement,
    readonly scene: Scene,
    public view: View,
    private readonly events: ViewerEvents,
  ) {
    const gl = canvas.getContext('webgl2', { antialias: false, alpha: false, preserveDrawingBuffer: true });
    if (!gl) throw new Error('this browser has no WebGL2: the viewer cannot draw');
    this.gl = gl;
    this.programs = createPrograms(gl);
    this.cache = new TileCache(gl, () => this.loaded(), events.onError, events.onRecover);
    this.listen();
    this.redraw();
  }

  setView(view: View): void {
    this.view = view;
    this.version += 1;
    this.events.onView(view);
    this.redraw();
  }

  redraw(): void {
    if (this.scheduled || this.destroyed) return;
    this.scheduled = true;
    // Until the frame runs the canvas shows an earlier scene or view: not complete.
    this.canvas.dataset.state = 'drawing';
    requestAnimationFrame(() => this.frame());
  }

  /** A chunk the frame asked for arrived: the completing frame now, others at a bounded rate. */
  private loaded(): void {
    if (!this.cache.waiting()) {
      this.redraw();
      return;
    }
    if (this.loadingFrame !== undefined) return;
    const wait = Math.max(0, this.lastFrame + LOADING_FRAME_MS - performance.now());
    this.loadingFrame = setTimeout(() => {
      this.loadingFrame = undefined;
      this.redraw();
    }, wait);
  }

  /** The label under a world point, from the finest loaded chunk of the mask that holds it (0: none). */
  labelAt(world: { x: number; y: number }): number {
    const layer = this.scene.cells?.layer;
    if (!layer) return 0;
    for (const [k, level] of layer.levels.entries()) {
      const px = Math.floor(world.x / level.pixelSize);
      const py = Math.floor(world.y / level.pixelSize);
      if (px < 0 || py < 0 || px >= level.width || py >= level.height) return 0;
      const x = Math.floor(px / level.chunkWidth);
      const y = Math.floor(py / level.chunkHeight);
      const tile = this.cache.get({ layer, level: k, x, y });
      if (tile?.labels)
        return tile.labels[(py - y * level.chunkHeight) * tile.width + (px - x * level.chunkWidth)]!;
    }
    return 0;
  }

  destroy(): void {
    this.destroyed = true;
    clearTimeout(this.loadingFrame);
    this.cache.dispose();
    this.gl.getExtension('WEBGL_lose_context')?.loseContext();
  }

  private size() {
    return { width: this.canvas.clientWidth, height: this.canvas.clientHeight };
  }

  private frame(): void {
    this.scheduled = false;
    if (this.destroyed) return;
    this.lastFrame = performance.now();
    if (!this.canvas.isConnected) {
      this.destroy();
      return;
    }
    const gl = this.gl;
    const ratio = devicePixelRatio;
    const { width, height } = this.size();
    const deviceWidth = Math.round(width * ratio);
    const deviceHeight = Math.round(height * ratio);
    if (this.canvas.width !== deviceWidth || this.canvas.height !== deviceHeight) {
      this.canvas.width = deviceWidth;
      this.canvas.height = deviceHeight;
    }
    gl.viewport(0, 0, deviceWidth, deviceHeight);
    gl.clearColor(0, 0, 0, 1);
    gl.clear(gl.COLOR_BUFFER_BIT);
    const zoom = this.view.zoom * ratio;
    const transform = [
      (2 * zoom) / deviceWidth,
      (-2 * zoom) / deviceHeight,
      (-this.view.x * 2 * zoom) / deviceWidth,
      (this.view.y * 2 * zoom) / deviceHeight,
    ] as const;
    const rect = visibleRect(this.view, width, height);
    const wanted: TileAddress[] = [];
    const drawn: { layer: Layer; level: number }[] = [];
    let complete = true;
    const draw = (layer: Layer, program: Program, set: () => void) => {
      gl.useProgram(program.program);
      gl.uniform4f(program.uniform('u_view'), ...transform);
      gl.uniform1i(program.uniform('u_tex'), 0);
      blendFor(gl, layer.kind);
      set();
      const level = levelFor(
        layer.levels.map((l) => l.pixelSize),
        1 / zoom,
      );
      drawn.push({ layer, level });
      complete = this.drawLayer(layer, program, level, rect, wanted) && complete;
    };
    const { he, channels, cells } = this.scene;
    if (he.visible)
      draw(he.layer, this.programs.rgb, () =>
        gl.uniform1f(this.programs.rgb.uniform('u_opacity'), he.opacity),
      );
    for (const channel of channels) {
      if (!channel.visible) continue;
      const program = this.programs.channel;
      draw(channel.layer, program, () => {
        gl.uniform2f(program.uniform('u_limits'), ...channel.limits);
        gl.uniform3f(program.uniform('u_colour'), ...channel.colour);
      });
    }
    // Drawn (mostly discarded) even with outlines off: its chunks answer the cell under the cursor.
    if (cells) {
      const program = this.programs.labels;
      draw(cells.layer, program, () => {
        gl.uniform1i(program.uniform('u_outlines'), cells.outlines ? 1 : 0);
        gl.uniform1ui(program.uniform('u_selected'), cells.selected);
        gl.uniform1ui(program.uniform('u_pinned'), cells.pinned);
        gl.uniform4f(program.uniform('u_outline'), 1, 1, 0, 1);
      });
    }
    // Only a settled view fetches ahead: until then every request serves what is on screen.
    this.cache.want(wanted, complete ? aheadOf(drawn, rect) : []);
    this.canvas.dataset.state = complete ? 'complete' : 'loading';
    if (complete && this.settledVersion !== this.version) {
      // The first complete viewport, for bench/viewer to read off the page's timeline.
      if (this.settledVersion === -1) performance.mark('sps-viewer-complete');
      this.settledVersion = this.version;
      this.canvas.dispatchEvent(new CustomEvent('viewer-settled', { detail: { view: this.view } }));
    }
  }

  /** Draws the chunks of level `k` of `layer` in `rect`; answers whether all were there. */
  private drawLayer(
    layer: Layer,
    program: Program,
    k: number,
    rect: WorldRect,
    wanted: TileAddress[],
  ): boolean {
    const level = layer.levels[k]!;
    const spanX = level.chunkWidth * level.pixelSize;
    const spanY = level.chunkHeight * level.pixelSize;
    let complete = true;
    for (const address of chunksIn(layer, k, rect)) {
      wanted.push(address);
      const { x, y } = address;
      const valid = validSize(level, x, y);
      const world = {
        x: x * spanX,
        y: y * spanY,
        width: valid.width * level.pixelSize,
        height: valid.height * level.pixelSize,
      };
      const tile = this.cache.get(address);
      if (tile) {
        this.drawTile(program, tile, world, { x: 0, y: 0, ...valid }, valid);
        continue;
      }
      complete = false;
      this.drawStandIn(layer, program, k, world);
    }
    return complete;
  }

  /** The nearest coarser loaded chunk that covers `world`, drawn in its place. */
  private drawStandIn(layer: Layer, program: Program, k: number, world: Rect): void {
    for (let j = k + 1; j < layer.levels.length; j++) {
      const level = layer.levels[j]!;
      const x = Math.floor((world.x + world.width / 2) / (level.chunkWidth * level.pixelSize));
      const y = Math.floor((world.y + world.height / 2) / (level.chunkHeight * level.pixelSize));
      const tile = this.cache.get({ layer, level: j, x, y });
      if (!tile) continue;
      const texel = {
        x: world.x / level.pixelSize - x * level.chunkWidth,
        y: world.y / level.pixelSize - y * level.chunkHeight,
        width: world.width / level.pixelSize,
        height: world.height / level.pixelSize,
      };
      this.drawTile(program, tile, world, texel, validSize(level, x, y));
      return;
    }
  }

  private drawTile(
    program: Program,
    tile: Tile,
    world: Rect,
    texel: Rect,
    valid: { width: number; height: number },
  ): void {
    const gl = this.gl;
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, tile.texture);
    gl.uniform4f(program.uniform('u_world'), world.x, world.y, world.width, world.height);
    gl.uniform4f(program.uniform('u_texel'), texel.x, texel.y, texel.width, texel.height);
    gl.uniform2i(program.uniform('u_size'), valid.width, valid.height);
    // The H&E's planes are stacked whole chunks apart, whatever part of the chunk is valid.
    gl.uniform1i(program.uniform('u_rows'), tile.height);
    gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
  }

  /** Zooms in (`steps` > 0) or out about the canvas centre. */
  zoomBy(steps: number): void {
    const { width, height } = this.size();
    this.setView(zoomAbout(this.view, width, height, width / 2, height / 2, ZOOM_STEP ** steps));
  }

  /**
   * One pointer drags to pan, two pinch to zoom (a touch screen has no wheel or keys); wheel or
   * +/- zoom about the cursor or centre, arrows pan by a quarter view. A press that neither
   * moved more than a few pixels nor had a second pointer beside it, or Enter, picks the point.
   */
  private listen(): void {
    const canvas = this.canvas;
    const down = new Map<number, Point>();
    // Restarted whenever a pointer goes down or up, so the pointers left carry on from there.
    let gesture: { view: View; from: Map<number, Point> } | undefined;
    let tap: Point | undefined;
    const at = (event: PointerEvent): Point => ({ x: event.offsetX, y: event.offsetY });
    const restart = () => {
      gesture = down.size > 0 ? { view: this.view, from: new Map(down) } : undefined;
    };
    canvas.addEventListener('pointerdown', (event) => {
      canvas.setPointerCapture(event.pointerId);
      down.set(event.pointerId, at(event));
      tap = down.size === 1 ? at(event) : undefined;
      restart();
    });
    const lift = (event: PointerEvent) => {
      if (!down.delete(event.pointerId)) return;
      restart();
      if (event.type !== 'pointerup' || !tap || down.size > 0) return;
      tap = undefined;
      const { width, height } = this.size();
      this.events.onPick(worldAt(this.view, width, height, event.offsetX, event.offsetY));
    };
    canvas.addEventListener('pointerup', lift);
    canvas.addEventListener('pointercancel', lift);
    canvas.addEventListener('pointermove', (event) => {
      const { width, height } = this.size();
      if (down.has(event.pointerId) && gesture) {
        down.set(event.pointerId, at(event));
        if (tap && Math.hypot(event.offsetX - tap.x, event.offsetY - tap.y) > 3) tap = undefined;
        this.setView(gestureView(gesture, down, width, height));
      }
      this.events.onPointer(worldAt(this.view, width, height, event.offsetX, event.offsetY));
    });
    canvas.addEventListener('pointerleave', () => this.events.onPointer(null));
    canvas.addEventListener(
      'wheel',
      (event) => {
        event.preventDefault();
        const { width, height } = this.size();
        this.setView(
          zoomAbout(this.view, width, height, event.offsetX, event.offsetY, 2 ** (-event.deltaY / 300)),
        );
      },
      { passive: false },
    );
    canvas.addEventListener('keydown', (event) => {
      const { width, height } = this.size();
      const step = { x: width / 4 / this.view.zoom, y: height / 4 / this.view.zoom };
      const moves: Record<string, () => View> = {
        ArrowLeft: () => ({ ...this.view, x: this.view.x - step.x }),
        ArrowRight: () => ({ ...this.view, x: this.view.x + step.x }),
        ArrowUp: () => ({ ...this.view, y: this.view.y - step.y }),
        ArrowDown: () => ({ ...this.view, y: this.view.y + step.y }),
        '+': () => zoomAbout(this.view, width, height, width / 2, height / 2, ZOOM_STEP),
        '=': () => zoomAbout(this.view, width, height, width / 2, height / 2, ZOOM_STEP),
        '-': () => zoomAbout(this.view, width, height, width / 2, height / 2, 1 / ZOOM_STEP),
      };
      if (event.key === 'Enter') {
        this.events.onPick({ x: this.view.x, y: this.view.y });
        return;
      }
      const move = moves[event.key];
      if (!move) return;
      event.preventDefault();
      this.setView(move());
    });
    new ResizeObserver(() => this.redraw()).observe(canvas);
  }
}
