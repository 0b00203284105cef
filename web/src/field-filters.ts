import { type FieldDefinition, operatorsByType } from '../../schemas/samples';
import { h } from './dom';
import { type FieldClause, fieldClauseOf, operatorTakesValue, parseFieldClause } from './list-query';

const operatorLabels: Record<string, string> = {
  eq: 'is',
  contains: 'contains',
  gte: 'at least',
  lte: 'at most',
  is_empty: 'is empty',
  is_not_empty: 'is not empty',
};

/** The value control of a definition's type; its value is the clause's JSON value. */
function valueControl(definition: FieldDefinition, label: string, current: FieldClause['value']) {
  const text = current === undefined ? '' : String(current);
  if (definition.valueType === 'boolean' || definition.valueType === 'select') {
    const choices = definition.valueType === 'boolean' ? ['true', 'false'] : definition.options;
    return h(
      'select',
      { 'aria-label': label },
      ...choices.map((choice) => h('option', { value: choice, selected: choice === text }, choice)),
    );
  }
  const type =
    definition.valueType === 'number' ? 'number' : definition.valueType === 'date' ? 'date' : 'text';
  return h('input', { type, value: text, 'aria-label': label, step: type === 'number' ? 'any' : undefined });
}

function typedValue(definition: FieldDefinition, text: string): FieldClause['value'] {
  if (definition.valueType === 'number') return Number(text);
  if (definition.valueType === 'boolean') return text === 'true';
  return text;
}

/**
 * The field facets of the list: one row per clause (field, an operator of its type, a value
 * control of its type). A clause of the address this page cannot read (an unknown definition,
 * a malformed value) is kept verbatim, so the service's answer says what is wrong with it.
 */
export function fieldFilters(definitions: FieldDefinition[], clauses: string[]) {
  const byId = new Map(definitions.map((definition) => [definition.id, definition]));
  const rows = h('div', { class: 'field-filters' });
  const kept: string[] = [];
  let count = 0;

  function addRow(clause?: FieldClause): void {
    const number = ++count;
    const row = h('div', { class: 'field-filter', 'data-clause': String(number) });
    const fieldSelect = h(
      'select',
      { 'aria-label': `Field of filter ${number}` },
      ...definitions.map((definition) =>
        h(
          'option',
          { value: definition.id, selected: definition.id === clause?.definitionId },
          definition.label,
        ),
      ),
    );
    const operatorSelect = h('select', { 'aria-label': `Operator of filter ${number}` });
    const valueSlot = h('span', {});
    const paint = (initial?: FieldClause) => {
      const definition = byId.get(fieldSelect.value)!;
      const operators = operatorsByType[definition.valueType];
      const chosen = initial?.operator ?? operatorSelect.value;
      operatorSelect.replaceChildren(
        ...operators.map((op) =>
          h('option', { value: op, selected: op === chosen }, operatorLabels[op] ?? op),
        ),
      );
      valueSlot.replaceChildren(
        operatorTakesValue(operatorSelect.value)
          ? valueControl(definition, `Value of filter ${number}`, initial?.value)
          : '',
      );
    };
    fieldSelect.addEventListener('change', () => paint());
    operatorSelect.addEventListener('change', () => {
      const value = valueSlot.querySelector<HTMLInputElement | HTMLSelectElement>('input, select')?.value;
      const definition = byId.get(fieldSelect.value)!;
      paint({
        definitionId: definition.id,
        operator: operatorSelect.value,
        value: value === undefined ? undefined : typedValue(definition, value),
      });
    });
    paint(clause);
    row.append(
      fieldSelect,
      operatorSelect,
      valueSlot,
      h(
        'button',
        { type: 'button', 'aria-label': `Remove filter ${number}`, onclick: () => row.remove() },
        'Remove',
      ),
    );
    rows.append(row);
  }

  for (const text of clauses) {
    const clause = parseFieldClause(text);
    if (clause && byId.has(clause.definitionId)) addRow(clause);
    else kept.push(text);
  }

  const node = h(
    'fieldset',
    { class: 'fields-facet' },
    h('legend', {}, 'Fields'),
    kept.length > 0 ? h('p', { class: 'note' }, `Kept from the address: ${kept.join(' · ')}`) : null,
    rows,
    definitions.length > 0
      ? h('button', { type: 'button', onclick: () => addRow() }, 'Add field filter')
      : h('p', { class: 'note' }, 'No field definitions.'),
  );

  /** The clauses as the address and the API carry them; a row whose value is blank is left out. */
  function value(): string[] {
    const built = [...rows.querySelectorAll<HTMLElement>('.field-filter')].flatMap((row) => {
      const [fieldSelect, operatorSelect] = row.querySelectorAll('select');
      const definition = byId.get(fieldSelect!.value)!;
      const operator = operatorSelect!.value;
      if (!operatorTakesValue(operator)) return [fieldClauseOf({ definitionId: definition.id, operator })];
      const control = row.querySelector<HTMLInputElement | HTMLSelectElement>('span input, span select');
      const text = control?.value.trim() ?? '';
      if (text === '') return [];
      return [fieldClauseOf({ definitionId: definition.id, operator, value: typedValue(definition, text) })];
    });
    return [...kept, ...built];
  }

  return { node, value };
}
