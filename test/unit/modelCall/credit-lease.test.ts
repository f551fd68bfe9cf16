import { InsufficientFunds } from '../../../src/billing/ledger';
import { BudgetExceeded } from '../../../src/billing/budget';
import { leftOf, refusal, settlement, waitWindow } from '../../../src/modelCall/creditLease';
import { staleAfter } from '../../../src/modelCall/creditHolders';

/** The credit lease's own arithmetic (src/modelCall/creditLease.ts): settlement, the wait of a refused request. */

describe('settlement', () => {
  test('a bill within the reservation gives the unused part back to the lease', () => {
    expect(settlement(700, 1_000, 5_000)).toEqual({ bill: 700, covered: 700, remaining: 5_300 });
  });
  test('a bill is whole VND, rounded up, never negative', () => {
    expect(settlement(10.2, 100, 0)).toEqual({ bill: 11, covered: 11, remaining: 89 });
    expect(settlement(-5, 100, 0)).toEqual({ bill: 0, covered: 0, remaining: 100 });
  });
  test('a bill above the reservation takes what the lease still has; the rest is left to the flush', () => {
    expect(settlement(1_500, 1_000, 5_000)).toEqual({ bill: 1_500, covered: 1_500, remaining: 4_500 });
    expect(settlement(1_500, 1_000, 200)).toEqual({ bill: 1_500, covered: 1_200, remaining: 0 });
    // A retired lease has given its remainder back: the reservation alone is covered.
    expect(settlement(1_500, 1_000, 0)).toEqual({ bill: 1_500, covered: 1_000, remaining: 0 });
  });
});

describe('waitWindow', () => {
  const W = 1_000;
  test('a first refusal waits waitMs', () => {
    expect(waitWindow(null, 5_000, 300, W)).toEqual({ start: 5_000, until: 6_000, lastLeft: 300 });
  });
  test('renewed while the ledger figure moves, never past six waits in all', () => {
    let w = waitWindow(null, 0, 300, W);
    w = waitWindow(w, 900, 300, W); // unchanged figure: not renewed
    expect(w.until).toBe(1_000);
    w = waitWindow(w, 900, 400, W); // moved: renewed from now
    expect(w.until).toBe(1_900);
    w = waitWindow(w, 5_500, 500, W);
    expect(w).toEqual({ start: 0, until: 6_000, lastLeft: 500 });
  });
});

describe('refusal', () => {
  test('names the request’s own amount and what is left, of the kind the ledger refused', () => {
    const funds = refusal(new InsufficientFunds(20_000, 9_000), 15_000, 10_000);
    expect(funds).toBeInstanceOf(InsufficientFunds);
    expect(funds.message).toBe('insufficient balance: 15000 VND needed, 10000 VND available');
    const budget = refusal(new BudgetExceeded(20_000, 9_000, 'day'), 15_000, 10_000) as BudgetExceeded;
    expect([budget.needed, budget.room, budget.period]).toEqual([15_000, 10_000, 'day']);
  });
  test('leftOf reads the figure of a ledger refusal only', () => {
    expect(leftOf(new InsufficientFunds(5, 3))).toBe(3);
    expect(leftOf(new BudgetExceeded(5, 2, 'month'))).toBe(2);
    expect(leftOf(new Error('x'))).toBeNull();
  });
});

test('a holder is declared dead after three missed heartbeats', () => {
  expect(staleAfter(10_000)).toBe(30_000);
});
