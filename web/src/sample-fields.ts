import type { FieldDefinition } from '../../schemas/samples';
import { h } from './dom';

type Control = HTMLInputElement | HTMLSelectElement;

/** How a stored value shows in its control ('' for none). */
function textOf(value: unknown): string {
  if (value === null || value === undefined) return '';
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/** The control's text as the PATCH value of the definition's type; '' clears the field. */
function patchValue(definition: FieldDefinition, text: string): unknown {
  if (text === '') return null;
  switch (definition.valueType) {
    case 'number':
      // Not a number goes as typed, for the service to say so beside the field.
      return Number.isFinite(Number(text)) ? Number(text) : text;
    case 'boolean':
      return text === 'true';
    case 'multi_select':
      return text
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    default:
      return text;
  }
}

function control(definition: FieldDefinition, id: string, text: string): Control {
  const describedBy = `${id}-error`;
  if (definition.valueType === 'boolean' || definition.valueType === 'select') {
    const choices = definition.valueType === 'boolean' ? ['true', 'false'] : definition.options;
    return h(
      'select',
      { id, 'aria-describedby': describedBy },
      h('option', { value: '' }, '—'),
      ...choices.map((choice) => h('option', { value: choice, selected: choice === text }, choice)),
    );
  }
  const type = definition.valueType === 'date' ? 'date' : 'text';
  return h('input', { id, type, value: text, 'aria-describedby': describedBy });
}

/**
 * The organization's writable fields on the edit form, one control per definition of its
 * type, each with its own error line: a refusal names the field (`fields.KEY: why`).
 */
export function customFieldInputs(definitions: FieldDefinition[], values: Record<string, unknown>) {
  const editable = definitions.filter(
    (definition) => definition.origin === 'organization' && definition.writable,
  );
  const entries = editable.map((definition) => {
    const id = `field-${definition.key}`;
    const initial = textOf(values[definition.key]);
    const input = control(definition, id, initial);
    const error = h('p', { id: `${id}-error`, class: 'field-error', role: 'alert', hidden: true });
    const hint = definition.valueType === 'multi_select' ? h('small', {}, 'Comma separated.') : null;
    const node = h('div', { class: 'field' }, h('label', { for: id }, definition.label), input, hint, error);
    return { definition, initial, input, error, node };
  });
  return {
    nodes: entries.map((entry) => entry.node),
    errors: () => entries.map((entry) => entry.error),
    /** The changed fields, by key, as PATCH values. */
    changes(): Record<string, unknown> {
      return Object.fromEntries(
        entries
          .filter((entry) => entry.input.value.trim() !== entry.initial)
          .map((entry) => [entry.definition.key, patchValue(entry.definition, entry.input.value.trim())]),
      );
    },
    /** The field a refusal's message names, if one of these. */
    named(message: string): { input: Control; error: HTMLElement } | undefined {
      return entries.find((entry) => message.includes(`fields.${entry.definition.key}`));
    },
  };
}
