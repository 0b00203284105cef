import { settlementAmounts } from '../../../db/credits';

describe('settlementAmounts: how a reservation is settled', () => {
  test('completed spends the whole reservation', () => {
    expect(settlementAmounts(1234, 'completed')).toEqual({ spent: 1234, released: 0 });
  });

  test('failed and cancelled release it all', () => {
    expect(settlementAmounts(1234, 'failed')).toEqual({ spent: 0, released: 1234 });
    expect(settlementAmounts(1234, 'cancelled')).toEqual({ spent: 0, released: 1234 });
  });

  test('partial_failed spends round(reserved x fraction) and releases the rest', () => {
    expect(settlementAmounts(1000, 'partial_failed', 0.97)).toEqual({ spent: 970, released: 30 });
    expect(settlementAmounts(3, 'partial_failed', 0.5)).toEqual({ spent: 2, released: 1 });
    expect(settlementAmounts(7, 'partial_failed', 0.95)).toEqual({ spent: 7, released: 0 });
    expect(settlementAmounts(101, 'partial_failed', 0.955)).toEqual({ spent: 96, released: 5 });
    expect(settlementAmounts(10, 'partial_failed', 0)).toEqual({ spent: 0, released: 10 });
    expect(settlementAmounts(10, 'partial_failed', 1)).toEqual({ spent: 10, released: 0 });
  });

  test('spent plus released is always the reservation', () => {
    for (const reserved of [0, 1, 2, 3, 17, 999, 123_457]) {
      for (let step = 0; step <= 40; step += 1) {
        const { spent, released } = settlementAmounts(reserved, 'partial_failed', step / 40);
        expect(spent + released).toBe(reserved);
        expect(spent).toBeGreaterThanOrEqual(0);
        expect(released).toBeGreaterThanOrEqual(0);
      }
    }
  });

  test('a partial failure without a fraction in [0, 1], or a bad reservation, is refused', () => {
    expect(() => settlementAmounts(10, 'partial_failed')).toThrow(/succeededFraction/);
    expect(() => settlementAmounts(10, 'partial_failed', 1.2)).toThrow(/succeededFraction/);
    expect(() => settlementAmounts(10, 'partial_failed', Number.NaN)).toThrow(/succeededFraction/);
    expect(() => settlementAmounts(-1, 'completed')).toThrow(/non-negative/);
    expect(() => settlementAmounts(1.5, 'completed')).toThrow(/non-negative/);
  });
});
