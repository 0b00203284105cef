import { apiQueryOf, facetsFromSearch, searchOf } from '../../../web/src/list-query';

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
