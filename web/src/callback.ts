import './account';
import { showError } from './dom';
import { finishSignIn } from './session';

/**
 * Where the authorization server sends the browser back: exchanges the code (with the PKCE
 * verifier this tab kept) for tokens, then returns to the page the sign-in started from.
 */
const progress = document.getElementById('progress')!;
finishSignIn(new URL(location.href)).then(
  (returnTo) => location.replace(returnTo),
  (err: unknown) => {
    progress.textContent = 'The sign-in did not finish. Use Sign in above to try again.';
    showError(err);
  },
);
