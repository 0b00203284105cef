import { h, pressed } from './dom';
import { apiKey, SESSION_EVENT, setApiKey, signedIn, signOut, startSignIn } from './session';

/**
 * The header's account control on every page, one state at a time: who is signed in and Sign
 * out (revokes the grant); or the development API key in use and Forget key; or Sign in (OAuth,
 * PKCE). A signed-in session is used before a key, as the SDK's credential does.
 */
const slot = h('div', { class: 'account', id: 'account' });

function render(): void {
  if (signedIn()) {
    slot.replaceChildren(
      h('span', { class: 'who' }, 'Signed in'),
      h(
        'button',
        {
          type: 'button',
          onclick: pressed(async () => {
            await signOut();
            location.reload();
          }),
        },
        'Sign out',
      ),
    );
    return;
  }
  if (apiKey()) {
    slot.replaceChildren(
      h('a', { class: 'who', href: 'settings' }, 'Using an API key'),
      h('button', { type: 'button', onclick: () => setApiKey(null) }, 'Forget key'),
    );
    return;
  }
  slot.replaceChildren(
    h('button', { type: 'button', onclick: pressed(() => startSignIn(location.href)) }, 'Sign in'),
  );
}

document.querySelector('header')?.append(slot);
window.addEventListener(SESSION_EVENT, render);
render();
