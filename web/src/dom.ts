type Child = Node | string | null | undefined | false;
type Attributes = Record<string, string | number | boolean | undefined | EventListener>;

/** A small element builder: attributes (`on*` as listeners, booleans as presence) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  element.append(...children.filter((child): child is Node | string => Boolean(child)));
  return element;
}

export function main(): HTMLElement {
  return document.getElementById('main')!;
}

/**
 * Says why a page could not do its work, in the contract's words (an SpsError's message is
 * the service's `message`); never leaves the page blank.
 */
export function showError(err: unknown, where: HTMLElement = document.getElementById('status')!): void {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown }).code;
  where.replaceChildren(
    h('strong', {}, 'Error'),
    ' ',
    typeof code === 'string' ? h('code', {}, code) : '',
    ' ',
    message,
  );
  where.hidden = false;
  where.classList.add('error');
}

export function clearError(where: HTMLElement = document.getElementById('status')!): void {
  where.replaceChildren();
  where.hidden = true;
}

/**
 * A button's click handler: its work runs with the button held, so a second click cannot send
 * the request again, and a failure is said in `where` (the page's status line by default).
 */
export function pressed(work: () => Promise<unknown>, where?: HTMLElement): (event: Event) => Promise<void> {
  return async (event) => {
    const button = event.currentTarget as HTMLButtonElement;
    clearError(where);
    button.disabled = true;
    try {
      await work();
    } catch (err) {
      showError(err, where);
    } finally {
      button.disabled = false;
    }
  };
}

/** The page's message when no credential is set: how to sign in or set one. */
export function needKey(): void {
  const status = document.getElementById('status')!;
  status.replaceChildren(
    'No API key is set and this tab is not signed in. Sign in (top of the page), or ',
    h('a', { href: 'settings' }, 'set an API key in Settings'),
    '.',
  );
  status.hidden = false;
}

/**
 * Runs `check` each time the page's tab is shown again (work done meanwhile in `sps`, the SDK
 * or another tab is looked for then), until `signal` ends it.
 */
export function whenShownAgain(check: () => Promise<void>, signal?: AbortSignal): void {
  const shown = () => {
    if (document.visibilityState === 'visible') void check();
  };
  document.addEventListener('visibilitychange', shown, { signal });
}

export function badge(status: string): HTMLElement {
  return h('span', { class: `badge badge-${status}` }, status.replaceAll('_', ' '));
}

/** `1 sample`, `3 samples`. */
export function samples(count: number): string {
  return `${count} sample${count === 1 ? '' : 's'}`;
}

export function bytes(count: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '—';
}
