import type { ActivitySlotInfo, CustomSlotSupplier, SlotPermit } from '@temporalio/worker';

/**
 * Activity slots that open one after another: at most one is open unused (the SDK reserves a
 * slot before each poll, and ahead of the next), and while a task this worker started less than
 * `settleMs` ago runs, its next slot stays closed, and so does its next poll. Temporal answers
 * a waiting poll of whichever worker it likes, so a job's regions or bands handed out together
 * would otherwise often go two to a worker while another worker stood idle; now an idle worker,
 * whose poll is open, takes the second.
 */
export function spreadingSlots(slots: number, settleMs: number): CustomSlotSupplier<ActivitySlotInfo> {
  let reserved = 0;
  let running = 0;
  let lastStart = Number.NEGATIVE_INFINITY;
  const waiting = new Set<() => void>();
  const wake = () => {
    for (const retry of [...waiting]) retry();
  };
  /** Milliseconds until a slot may open: 0 now, Infinity until one is released. */
  const wait = () => {
    if (reserved >= slots || reserved > running) return Number.POSITIVE_INFINITY;
    return running === 0 ? 0 : Math.max(0, lastStart + settleMs - Date.now());
  };
  const take = (): SlotPermit => {
    reserved += 1;
    return {};
  };
  return {
    type: 'custom',
    async reserveSlot(_context, signal) {
      for (;;) {
        signal.throwIfAborted();
        const ms = wait();
        if (ms === 0) return take();
        await new Promise<void>((resolve, reject) => {
          const settle = (aborted: boolean) => {
            waiting.delete(retry);
            clearTimeout(timer);
            signal.removeEventListener('abort', abort);
            if (aborted) reject(signal.reason);
            else resolve();
          };
          const retry = () => settle(false);
          const abort = () => settle(true);
          const timer = Number.isFinite(ms) ? setTimeout(retry, ms) : undefined;
          waiting.add(retry);
          signal.addEventListener('abort', abort, { once: true });
        });
      }
    },
    tryReserveSlot() {
      return wait() === 0 ? take() : null;
    },
    markSlotUsed() {
      running += 1;
      lastStart = Date.now();
      wake();
    },
    releaseSlot(context) {
      reserved -= 1;
      if (context.slotInfo) running -= 1;
      wake();
    },
  };
}
