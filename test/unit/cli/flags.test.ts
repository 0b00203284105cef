import { serviceUrl, UsageError } from '../../../cli/sps/config';
import { fieldClause, fieldValue, micronsPerPixel, wholeNumber } from '../../../cli/sps/flags';

test('--mpp reads a positive number, with a decimal point or comma', () => {
  expect(micronsPerPixel('0.25')).toBe(0.25);
  expect(micronsPerPixel(' 0,5 ')).toBe(0.5);
  for (const wrong of ['', ' ', 'abc', '0', '-0.25', '100.5', 'Infinity', '0.25um'])
    expect(() => micronsPerPixel(wrong)).toThrow(
      new UsageError(
        `--mpp must be a number of microns per pixel greater than 0 and at most 100 (such as 0.25), got ${wrong}`,
      ),
    );
});

test('--field takes JSON where the value reads as JSON, else the text the shell passed', () => {
  expect(fieldValue('stage=II')).toEqual(['stage', 'II']);
  expect(fieldValue('stage="3"')).toEqual(['stage', '3']);
  expect(fieldValue('score=3')).toEqual(['score', 3]);
  expect(fieldValue('reviewed=true')).toEqual(['reviewed', true]);
  expect(fieldValue('stage=null')).toEqual(['stage', null]);
  expect(fieldValue('panel=["a","b"]')).toEqual(['panel', ['a', 'b']]);
  expect(fieldValue('note=a=b')).toEqual(['note', 'a=b']);
  expect(fieldValue('stage=')).toEqual(['stage', '']);
  expect(() => fieldValue('=II')).toThrow(new UsageError('--field wants key=VALUE, got =II'));
  expect(() => fieldValue('stage')).toThrow(new UsageError('--field wants key=VALUE, got stage'));
});

test('ls --field names a field by its key or id, and its value as edit --field reads it', () => {
  const fields = [
    { id: 'aaaaaaaa-0000-4000-8000-000000000001', key: 'tags' },
    { id: 'aaaaaaaa-0000-4000-8000-000000000002', key: 'scanned' },
  ];
  const [tags, scanned] = fields.map((field) => field.id);
  expect(fieldClause('tags:contains:tumor', fields)).toBe(`${tags}:contains:"tumor"`);
  expect(fieldClause(`${tags}:contains:"tumor"`, fields)).toBe(`${tags}:contains:"tumor"`);
  expect(fieldClause('scanned:gte:"2026-01-01T10:30"', fields)).toBe(`${scanned}:gte:"2026-01-01T10:30"`);
  expect(fieldClause('scanned:eq:10:30', fields)).toBe(`${scanned}:eq:"10:30"`);
  expect(fieldClause('tags:is_empty', fields)).toBe(`${tags}:is_empty`);
  expect(() => fieldClause('tags', fields)).toThrow(new UsageError('--field wants KEY:op[:VALUE], got tags'));
  expect(() => fieldClause('site:eq:north', fields)).toThrow(
    new UsageError("--field: no field 'site' here; the fields are tags, scanned (sps samples fields)"),
  );
});

test('--parallel and --limit read a whole number of at least one', () => {
  expect(wholeNumber('--parallel', '8')).toBe(8);
  expect(wholeNumber('--limit', '1')).toBe(1);
  for (const wrong of ['', 'two', '0', '-1', '2.5', 'NaN'])
    expect(() => wholeNumber('--parallel', wrong)).toThrow(
      new UsageError(`--parallel must be a whole number of at least 1, got ${wrong}`),
    );
});

test('the service URL is an http or https URL, or a usage error naming where it came from', () => {
  expect(serviceUrl('http://127.0.0.1:8080', '--base-url')).toBe('http://127.0.0.1:8080');
  expect(serviceUrl('https://sps.example.org/api/v1', 'SPS_BASE_URL')).toBe('https://sps.example.org/api/v1');
  for (const wrong of ['127.0.0.1:8080', 'localhost:8080', 'sps.example.org', 'ftp://sps.example.org', ''])
    expect(() => serviceUrl(wrong, 'SPS_BASE_URL')).toThrow(
      new UsageError(`SPS_BASE_URL must be an http or https URL such as http://127.0.0.1:8080, got ${wrong}`),
    );
});
