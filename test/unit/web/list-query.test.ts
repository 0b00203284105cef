import {
  apiQueryOf,
  facetsFromSearch,
  fieldClauseOf,
  operatorTakesValue,
  parseFieldClause,
  searchOf,
} from '../../../web/src/list-query';

describe('the list page address and the API query', () => {
  test('an address reads into facets and writes back in the order of the service appUrl', () => {
    const search =
      '?scope=all&q=tonsil&uploaded_from=2026-01-01&uploaded_to=2026-02-01&status=ready&status=preprocessing' +
      '&workflow=has_results&marker=CD3%3Acompleted&field=0b7c%3Ais_empty';
    expect(searchOf(facetsFromSearch(search))).toBe(search);
  });

  test('scope mine and empty facets leave the address bare', () => {
    expect(searchOf(facetsFromSearch('?scope=mine&q='))).toBe('');
  });

  test("the SDK query carries the same parameters, scope mine omitted as in the service's appUrl", () => {
    const facets = facetsFromSearch('?q=CMU&status=ready&workflow=in_flight');
    expect(apiQueryOf(facets)).toEqual({
      scope: undefined,
      q: 'CMU',
      uploaded_from: undefined,
      uploaded_to: undefined,
      status: ['ready'],
      workflow: ['in_flight'],
      marker: undefined,
      field: undefined,
    });
  });
});

describe('field facets', () => {
  const id = '7f1c2d3e-0000-4000-8000-000000000001';

  test('a clause with a JSON value reads and writes back unchanged', () => {
    for (const clause of [`${id}:eq:"site A"`, `${id}:gte:3.5`, `${id}:eq:true`, `${id}:is_empty`]) {
      expect(fieldClauseOf(parseFieldClause(clause)!)).toBe(clause);
    }
    expect(parseFieldClause(`${id}:contains:"a:b"`)).toEqual({
      definitionId: id,
      operator: 'contains',
      value: 'a:b',
    });
  });

  test('a value that is not JSON is no clause of ours (the service judges it)', () => {
    expect(parseFieldClause(`${id}:eq:site`)).toBeNull();
    expect(parseFieldClause(`${id}:eq:{"a":1}`)).toBeNull();
    expect(parseFieldClause('nonsense')).toBeNull();
  });

  test('in the address the value is JSON then URL-encoded, as the API reads it', () => {
    const facets = facetsFromSearch('');
    facets.field = [fieldClauseOf({ definitionId: id, operator: 'eq', value: 'site A' })];
    expect(searchOf(facets)).toBe(`?field=${encodeURIComponent(`${id}:eq:"site A"`).replaceAll('%20', '+')}`);
    expect(operatorTakesValue('is_not_empty')).toBe(false);
    expect(operatorTakesValue('contains')).toBe(true);
  });
});
