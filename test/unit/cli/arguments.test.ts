import { parseVnd } from '../../../src/cli/admin';
import { decimal, toVnd } from '../../../src/cli/catalogImport';
import { parseEffectiveAt, PricesUsageError } from '../../../src/cli/prices';
import { generatePassword } from '../../../src/cli/consoleUsers';

/** The admin CLI's arguments: VND amounts, price dates, exact USD-to-VND conversion, generated passwords. */

test('VND amounts: whole numbers, underscores may group them; anything else refused saying what was given', () => {
  expect(parseVnd('500000', 'amount')).toBe(500_000);
  expect(parseVnd(' 1_000_000 ', 'amount')).toBe(1_000_000);
  expect(parseVnd('0', 'amount', true)).toBe(0);
  expect(() => parseVnd('0', 'amount')).toThrow('amount must be greater than 0');
  expect(() => parseVnd(undefined, 'amount')).toThrow('missing <amount>');
  for (const bad of ['-5', '1.5', '1e6', '1,000', '1.000', '_1', '1__0', '', 'ten'])
    expect(() => parseVnd(bad, 'amount')).toThrow(/^amount must be a whole number of VND/);
  expect(() => parseVnd('9'.repeat(20), 'amount')).toThrow('amount is too large');
});

test('an exact decimal of what the price list writes, exponents included', () => {
  expect(decimal(0.0000025)).toEqual({ n: 25n, scale: 7 }); // String(0.0000025) is "0.0000025"
  expect(decimal(2.5e-7)).toEqual({ n: 25n, scale: 8 }); // "2.5e-7"
  expect(decimal('1.5E3')).toEqual({ n: 1500n, scale: 0 });
  expect(decimal(26000)).toEqual({ n: 26000n, scale: 0 });
  expect(decimal(-1)).toBeNull();
  expect(decimal('abc')).toBeNull();
});

test('USD to VND: ceil(usd x units x rate), exact where floats are not', () => {
  // $2.5 per 1M tokens at 26,000 VND/USD: 65,000 VND per 1M.
  expect(toVnd(decimal(0.0000025)!, 1_000_000n, decimal(26000)!)).toBe(65_000);
  // 0.1 + 0.2 style inputs: 0.0000003 x 1M x 25,000.5 = 7,500.15 -> 7,501 (rounded up, never down).
  expect(toVnd(decimal(0.0000003)!, 1_000_000n, decimal('25000.5')!)).toBe(7_501);
  expect(toVnd(decimal(0)!, 1_000_000n, decimal(26000)!)).toBe(0);
  expect(() => toVnd(decimal(1e10)!, 1_000_000n, decimal(26000)!)).toThrow('price out of range');
});

test('--effective-at: an RFC 3339 date-time with its offset ahead of now, or now; anything else refused', () => {
  expect(parseEffectiveAt(undefined)).toBeNull();
  expect(parseEffectiveAt('now')).toBeNull();
  const year = new Date().getUTCFullYear() + 1;
  expect(parseEffectiveAt(`${year}-12-01T00:00:00+07:00`)!.toISOString()).toBe(`${year}-11-30T17:00:00.000Z`);
  // `new Date('5')` is 1 May 2001 and `new Date('12/31/2026')` local midnight: a typo must not set a price at once.
  // A bare date has no offset (whose midnight?), 02-30 is no calendar day, and a past instant cannot be scheduled.
  for (const bad of ['5', '2026', '12/31/2026', 'Dec 31 2026', 'tomorrow', `${year}-13-01`, `${year}-12-01`])
    expect(() => parseEffectiveAt(bad)).toThrow(PricesUsageError);
  expect(() => parseEffectiveAt(`${year}-02-30T00:00:00Z`)).toThrow(/not a date-time/);
  expect(() => parseEffectiveAt('1970-01-02T00:00:00Z')).toThrow(/has passed/);
});

test('generated console passwords: 18 base64url characters (108 random bits), never the same', () => {
  const all = Array.from({ length: 200 }, () => generatePassword());
  expect(new Set(all).size).toBe(200);
  for (const p of all) expect(p).toMatch(/^[A-Za-z0-9_-]{18}$/);
});
