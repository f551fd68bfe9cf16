import { apiProcessCount } from '../../../src/runtime/apiProcesses';

test('API_PROCESSES: unset or 1 is one process, auto is one per core, a bad value is refused', () => {
  expect(apiProcessCount(undefined, 8)).toBe(1);
  expect(apiProcessCount('', 8)).toBe(1);
  expect(apiProcessCount('1', 8)).toBe(1);
  expect(apiProcessCount('auto', 8)).toBe(8);
  expect(apiProcessCount('3', 8)).toBe(3);
  for (const bad of ['0', '-2', '1.5', 'many', '1e3', '257'])
    expect(() => apiProcessCount(bad, 8)).toThrow(/API_PROCESSES must be/);
});
