import { h, showError } from './dom';
import { apiKey, SESSION_EVENT, signedIn, signOut, startSignIn } from './session';

/**
 * The header's account control on every page: Sign in (OAuth, PKCE), or who is signed in and
 * Sign out (revokes the grant), or a note that a development API key is in use.
 */
const slot = h('div', { class: 'account', id: 'account' });

function act(work: () => Promise<void>) {
  return async (event: Event) => {
    const button = event.currentTarget as HTMLButtonElement;
    button.disabled = true;
    try {
      await work();
    } catch (err) {
      showError(err);
    } finally {
      button.disabled = false;
    }
  };
}

function render(): void {
  if (signedIn()) {
    slot.replaceChildren(
      h('span', { class: 'who' }, 'Signed in'),
      h(
        'button',
        {
          type: 'button',
          onclick: act(async () => {
            await signOut();
            location.reload();
          }),
        },
        'Sign out',
      ),
    );
    return;
  }
  slot.replaceChildren(
    apiKey() ? h('a', { class: 'who', href: 'settings' }, 'Using an API key') : '',
    h('button', { type: 'button', onclick: act(() => startSignIn(location.href)) }, 'Sign in'),
  );
}

document.querySelector('header')?.append(slot);
window.addEventListener(SESSION_EVENT, render);
render();
