import { clearError, h, main } from './dom';
import { apiKey, setApiKey } from './session';

const note = h('p', { id: 'key-state', role: 'status' });
const input = h('input', {
  id: 'api-key',
  name: 'apiKey',
  type: 'password',
  autocomplete: 'off',
  required: true,
});

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
      describeKey();
    },
  },
  h('label', { for: 'api-key' }, 'API key (development sign-in)'),
  input,
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save key')),
);
const forget = h(
  'button',
  {
    type: 'button',
    onclick: () => {
      setApiKey(null);
      describeKey();
    },
  },
  'Forget key',
);
main().append(form, note, forget);
describeKey();
