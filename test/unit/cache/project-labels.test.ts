import { ProjectLabels } from '../../../src/cache/projectLabels';

test('project labels: the first N projects by id, the rest "other", no project "none"', () => {
  const l = new ProjectLabels(2);
  expect(l.of('proj_a')).toBe('proj_a');
  expect(l.of(null)).toBe('none');
  expect(l.of(undefined)).toBe('none');
  expect(l.of('proj_b')).toBe('proj_b');
  expect(l.of('proj_c')).toBe('other');
  expect(l.of('proj_a')).toBe('proj_a');
  expect(l.of('proj_d')).toBe('other');
});
