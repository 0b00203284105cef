import './account';
import { clearError, h, main } from './dom';
import { apiKey, SESSION_EVENT, setApiKey, signedIn } from './session';

/**
 * How this tab reaches the API: the OAuth sign-in (the header's Sign in and Sign out), or an
 * API key pasted here for development. Both end with the tab.
 */
const signIn = h('p', { id: 'signin-state', role: 'status' });
const note = h('p', { id: 'key-state', role: 'status' });
const input = h('input', {
  id: 'api-key',
  name: 'apiKey',
  type: 'password',
  autocomplete: 'off',
  required: true,
});

function describeSignIn(): void {
  const tokens = signedIn();
  signIn.textContent = tokens
    ? `Signed in for this tab with ${tokens.scope || 'no scopes'}; the access token renews itself before ${new Date(tokens.expiresAt).toLocaleTimeString()}.`
    : apiKey()
      ? 'Not signed in: this tab uses the API key below. Forget it to sign in instead.'
      : 'Not signed in: use Sign in at the top of the page (the service’s own sign-in and organization consent).';
}

function describeKey(): void {
  note.textContent = apiKey()
    ? 'An API key is set for this tab (kept in session storage; it ends with the tab).'
    : 'No API key is set.';
}

const form = h(
  'form',
  {
    onsubmit: (event: Event) => {
      event.preventDefault();
      setApiKey(input.value.trim() || null);
      input.value = '';
      clearError();
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'api-key' }, 'API key (development sign-in)'), input),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save key')),
);
const forget = h(
  'button',
  {
    type: 'button',
    onclick: () => setApiKey(null),
  },
  'Forget key',
);
main().append(
  h('h2', {}, 'Sign-in'),
  signIn,
  h('h2', {}, 'API key'),
  h('p', {}, 'A signed-in session is used first; without one, the pages use this key.'),
  form,
  note,
  forget,
);
window.addEventListener(SESSION_EVENT, () => {
  describeSignIn();
  describeKey();
});
describeSignIn();
describeKey();
