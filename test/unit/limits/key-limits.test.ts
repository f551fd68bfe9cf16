import { hasBudget, limitsFromRow, NO_LIMITS, parseLimitsPatch } from '../../../src/limits/keyLimits';
import { ApiError } from '../../../src/errors';

/** A key's limits as the console, operator routes and CLI give them: what is taken, and what is refused and why. */

/** The 400 a bad patch gets: its param and message. */
function refusal(input: unknown, expiry = true): { param: string | null; message: string } {
  try {
    parseLimitsPatch(input, { expiry });
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return { param: (e as ApiError).param, message: (e as ApiError).message };
  }
  throw new Error(`accepted: ${JSON.stringify(input)}`);
}

test('whole numbers set a limit, null clears it; rates from 1, budgets from 0', () => {
  expect(parseLimitsPatch({ rpm: 1, tpm: null, budgetDayVnd: 0, budgetMonthVnd: 9e15 }, { expiry: false })).toEqual({
    rpm: 1,
    tpm: null,
    budgetDayVnd: 0,
    budgetMonthVnd: 9e15,
  });
  expect(parseLimitsPatch({ rpm: 2_000_000_000 }, { expiry: false })).toEqual({ rpm: 2_000_000_000 });
});

test('each bad value is refused naming its field', () => {
  expect(refusal({ rpm: 0 }).param).toBe('rpm');
  expect(refusal({ rpm: 2_000_000_001 }).message).toMatch(/rpm \(requests per minute\) must be a whole number from 1/);
  expect(refusal({ tpm: 1.5 }).param).toBe('tpm');
  expect(refusal({ tpm: '10' }).param).toBe('tpm');
  expect(refusal({ budgetDayVnd: -1 }).param).toBe('budgetDayVnd');
  expect(refusal({ budgetMonthVnd: 2 ** 53 }).param).toBe('budgetMonthVnd');
  expect(refusal({ rpm: 5, tmp: 5 })).toEqual({
    param: 'tmp',
    message: 'unknown limit "tmp"; known: rpm, tpm, budgetDayVnd, budgetMonthVnd, expiresAt',
  });
  // Keys of every object are not limits: FIELDS' own keys only.
  expect(refusal(JSON.parse('{"__proto__":{"rpm":1}}')).param).toBe('__proto__');
  expect(refusal({ constructor: 2 }).param).toBe('constructor');
  expect(refusal({ toString: 1 }).param).toBe('toString');
});

test('the patch itself must be a non-empty object', () => {
  for (const bad of [null, 5, 'rpm', [], [1]]) expect(refusal(bad).message).toBe('limits must be a JSON object');
  expect(refusal({}, false).message).toBe('give at least one of rpm, tpm, budgetDayVnd, budgetMonthVnd');
  expect(refusal({}).message).toMatch(/, expiresAt$/);
});

test('expiresAt (keys only): an ISO date-time stored in UTC, or null; out of range or free text refused', () => {
  expect(parseLimitsPatch({ expiresAt: '2026-12-31T23:59:59+07:00' }, { expiry: true })).toEqual({
    expiresAt: '2026-12-31T16:59:59.000Z',
  });
  expect(parseLimitsPatch({ expiresAt: null }, { expiry: true })).toEqual({ expiresAt: null });
  expect(refusal({ expiresAt: 'tomorrow' }).param).toBe('expiresAt');
  expect(refusal({ expiresAt: '2026-13-45' }).param).toBe('expiresAt');
  expect(refusal({ expiresAt: 1767225599000 }).param).toBe('expiresAt');
  expect(refusal({ expiresAt: '9999-12-31T23:59:59-14:00' }).message).toBe(
    'expiresAt must lie in the years 1970 to 9999 (UTC)',
  );
  expect(refusal({ expiresAt: '1969-12-31T23:59:59Z' }).param).toBe('expiresAt');
  // An account's defaults have no expiry: the field is unknown there.
  expect(refusal({ expiresAt: null }, false).message).toMatch(/^unknown limit "expiresAt"/);
});

test('a row of effective limits: all null is the shared NO_LIMITS; a budget is any day or month amount', () => {
  expect(limitsFromRow({ rpm: null, tpm: null, budget_day: null, budget_month: null })).toBe(NO_LIMITS);
  const l = limitsFromRow({ rpm: 5, tpm: null, budget_day: null, budget_month: 0 });
  expect(l).toEqual({ rpm: 5, tpm: null, budgetDayVnd: null, budgetMonthVnd: 0 });
  expect(hasBudget(l)).toBe(true); // a zero budget is a budget (it stops every paid request)
  expect(hasBudget({ ...NO_LIMITS, rpm: 1 })).toBe(false);
  expect(Object.isFrozen(NO_LIMITS)).toBe(true);
});
