import type { ActivitySlotInfo, SlotReserveContext } from '@temporalio/worker';
import { spreadingSlots } from '../../../cli/spread-slots';

const context = { slotType: 'activity', taskQueue: 'compute' } as SlotReserveContext;
const task: ActivitySlotInfo = { type: 'activity', activityType: 'buildHePyramidRegion' };

beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
afterEach(() => jest.useRealTimers());

/** Whether `promise` settled once the timers have run `ms`. */
async function settledAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await jest.advanceTimersByTimeAsync(ms);
  return settled;
}

test('an idle worker opens one slot at once, and the next only a while after its task started', async () => {
  const slots = spreadingSlots(2, 250);
  const signal = new AbortController().signal;
  const first = await slots.reserveSlot(context, signal);
  // The SDK asks for its next poll's slot ahead; it stays closed while the first is unused.
  const second = slots.reserveSlot(context, signal);
  expect(await settledAfter(second, 1000)).toBe(false);
  slots.markSlotUsed({ slotInfo: task, permit: first });
  expect(await settledAfter(second, 249)).toBe(false);
  expect(slots.tryReserveSlot(context)).toBeNull();
  expect(await settledAfter(second, 1)).toBe(true);
});

test('no more slots than asked for, and a release opens one', async () => {
  const slots = spreadingSlots(2, 250);
  const signal = new AbortController().signal;
  const permits = [await slots.reserveSlot(context, signal)];
  slots.markSlotUsed({ slotInfo: task, permit: permits[0]! });
  await jest.advanceTimersByTimeAsync(250);
  permits.push(await slots.reserveSlot(context, signal));
  slots.markSlotUsed({ slotInfo: task, permit: permits[1]! });
  const third = slots.reserveSlot(context, signal);
  expect(await settledAfter(third, 10_000)).toBe(false);
  slots.releaseSlot({ slotInfo: task, permit: permits[0]! });
  expect(await settledAfter(third, 250)).toBe(true);
});

test('a task that ran past the pause leaves the next slot open at once; an unused release reopens too', async () => {
  const slots = spreadingSlots(3, 250);
  const signal = new AbortController().signal;
  const first = await slots.reserveSlot(context, signal);
  slots.markSlotUsed({ slotInfo: task, permit: first });
  await jest.advanceTimersByTimeAsync(5000);
  const polled = slots.tryReserveSlot(context);
  expect(polled).not.toBeNull();
  const next = slots.reserveSlot(context, signal);
  expect(await settledAfter(next, 10_000)).toBe(false);
  // A poll that timed out gives its slot back unused.
  slots.releaseSlot({ permit: polled! });
  expect(await settledAfter(next, 0)).toBe(true);
});

test('an abandoned reservation rejects with the signal', async () => {
  const slots = spreadingSlots(1, 250);
  const controller = new AbortController();
  await slots.reserveSlot(context, controller.signal);
  const waiting = slots.reserveSlot(context, controller.signal);
  const reason = new Error('poller stopped');
  reason.name = 'AbortError';
  controller.abort(reason);
  await expect(waiting).rejects.toBe(reason);
});
