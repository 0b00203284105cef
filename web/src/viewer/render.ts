import type { LayerKind } from './sources';

/**
 * The viewer's three WebGL2 programs, one per layer kind. Each draws one tile (or the part of a
 * coarser tile standing in for it) as a quad: `u_world` is its rectangle in world units,
 * `u_texel` the same rectangle in the tile's texels, `u_view` maps world units to clip space.
 * Texels are read with `texelFetch` (nearest, exact integers), so what reaches the screen is
 * the stored value under the chosen colour and contrast, nothing interpolated.
 */
const vertex = `#version 300 es
in vec2 a_unit;
uniform vec4 u_world;
uniform vec4 u_view;
uniform vec4 u_texel;
out vec2 v_texel;
void main() {
  vec2 world = u_world.xy + a_unit * u_world.zw;
  gl_Position = vec4(world * u_view.xy + u_view.zw, 0.0, 1.0);
  v_texel = u_texel.xy + a_unit * u_texel.zw;
}`;

const header = `#version 300 es
precision highp float;
precision highp int;
in vec2 v_texel;
uniform ivec2 u_size;
out vec4 colour;
ivec2 texel(vec2 at) { return clamp(ivec2(floor(at)), ivec2(0), u_size - 1); }
`;

/** H&E: planar R, G, B rows of one R8 texture, drawn opaque (black where the opacity is lower). */
const rgb = `${header}
uniform highp sampler2D u_tex;
uniform float u_opacity;
uniform int u_rows;
void main() {
  ivec2 p = texel(v_texel);
  ivec2 plane = ivec2(0, u_rows);
  vec3 rgb = vec3(texelFetch(u_tex, p, 0).r, texelFetch(u_tex, p + plane, 0).r,
    texelFetch(u_tex, p + 2 * plane, 0).r);
  colour = vec4(rgb * u_opacity, 1.0);
}`;

/** A marker: its stored uint16 value through the contrast limits, times its colour, added on. */
const channel = `${header}
uniform highp usampler2D u_tex;
uniform vec2 u_limits;
uniform vec3 u_colour;
void main() {
  float value = float(texelFetch(u_tex, texel(v_texel), 0).r);
  float level = clamp((value - u_limits.x) / max(u_limits.y - u_limits.x, 1e-6), 0.0, 1.0);
  colour = vec4(u_colour * level, 1.0);
}`;

/**
 * Cell outlines: a pixel is on an outline where the label under it differs from the label one
 * screen pixel to the right or below (the derivatives of the texel coordinate), so outlines
 * stay one pixel wide at every zoom. The cell under the cursor is tinted grey, the pinned one cyan.
 */
const labels = `${header}
uniform highp usampler2D u_tex;
uniform bool u_outlines;
uniform uint u_selected;
uniform uint u_pinned;
uniform vec4 u_outline;
uint label(vec2 at) { return texelFetch(u_tex, texel(at), 0).r; }
void main() {
  uint here = label(v_texel);
  bool edge = here != label(v_texel + dFdx(v_texel)) || here != label(v_texel + dFdy(v_texel));
  if (u_outlines && edge) { colour = u_outline; return; }
  if (here != 0u && here == u_pinned) { colour = vec4(0.0, 0.35, 0.35, 0.35); return; }
  if (here != 0u && here == u_selected) { colour = vec4(0.3, 0.3, 0.3, 0.3); return; }
  discard;
}`;

const sources: Record<LayerKind, string> = { rgb, channel, labels };

export interface Program {
  program: WebGLProgram;
  uniform(name: string): WebGLUniformLocation | null;
}

function compile(gl: WebGL2RenderingContext, type: number, source: string): WebGLShader {
  const shader = gl.createShader(type)!;
  gl.shaderSource(shader, source);
  gl.compileShader(shader);
  if (!gl.getShaderParameter(shader, gl.COMPILE_STATUS))
    throw new Error(`shader: ${gl.getShaderInfoLog(shader)}`);
  return shader;
}

function link(gl: WebGL2RenderingContext, fragment: string): Program {
  const program = gl.createProgram()!;
  gl.attachShader(program, compile(gl, gl.VERTEX_SHADER, vertex));
  gl.attachShader(program, compile(gl, gl.FRAGMENT_SHADER, fragment));
  gl.bindAttribLocation(program, 0, 'a_unit');
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS))
    throw new Error(`program: ${gl.getProgramInfoLog(program)}`);
  const locations = new Map<string, WebGLUniformLocation | null>();
  return {
    program,
    uniform(name) {
      if (!locations.has(name)) locations.set(name, gl.getUniformLocation(program, name));
      return locations.get(name)!;
    },
  };
}

/** The programs and the unit quad they all draw. */
export function createPrograms(gl: WebGL2RenderingContext): Record<LayerKind, Program> {
  const quad = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, quad);
  gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([0, 0, 1, 0, 0, 1, 1, 1]), gl.STATIC_DRAW);
  gl.enableVertexAttribArray(0);
  gl.vertexAttribPointer(0, 2, gl.FLOAT, false, 0, 0);
  return {
    rgb: link(gl, sources.rgb),
    channel: link(gl, sources.channel),
    labels: link(gl, sources.labels),
  };
}

/** How each kind composes over what is drawn: H&E replaces, markers add, outlines cover. */
export function blendFor(gl: WebGL2RenderingContext, kind: LayerKind): void {
  if (kind === 'rgb') {
    gl.disable(gl.BLEND);
    return;
  }
  gl.enable(gl.BLEND);
  if (kind === 'channel') gl.blendFunc(gl.ONE, gl.ONE);
  else gl.blendFunc(gl.ONE, gl.ONE_MINUS_SRC_ALPHA);
}
