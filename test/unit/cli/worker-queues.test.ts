import { loadConfig, WORKER_SLOT_DEFAULTS } from '../../../cli/config';
import { composeProcesses } from '../../support/compose';

test('a worker polls every queue by default, with the default slots', () => {
  const config = loadConfig({});
  expect(config.worker.queues).toEqual(['io', 'compute', 'inference']);
  expect(config.worker.slots).toEqual(WORKER_SLOT_DEFAULTS);
});

test('WORKER_QUEUES and WORKER_*_CONCURRENCY choose the queues and their slots', () => {
  const config = loadConfig({
    WORKER_QUEUES: 'inference, compute',
    WORKER_COMPUTE_CONCURRENCY: '4',
    WORKER_INFERENCE_CONCURRENCY: '2',
  });
  expect(config.worker.queues).toEqual(['inference', 'compute']);
  expect(config.worker.slots).toEqual({ io: WORKER_SLOT_DEFAULTS.io, compute: 4, inference: 2 });
});

test.each([
  ['gpu', /WORKER_QUEUES/],
  ['io,io', /WORKER_QUEUES: a queue is named twice/],
  [',', /WORKER_QUEUES/],
])('WORKER_QUEUES=%s is refused with its name', (value, message) => {
  expect(() => loadConfig({ WORKER_QUEUES: value })).toThrow(message);
});

test('a slot count must be a positive whole number', () => {
  expect(() => loadConfig({ WORKER_INFERENCE_CONCURRENCY: '0' })).toThrow(/WORKER_INFERENCE_CONCURRENCY/);
  expect(() => loadConfig({ WORKER_IO_CONCURRENCY: 'many' })).toThrow(/WORKER_IO_CONCURRENCY/);
});

test('docker-compose.yml: its workers poll every queue, two of them each heavy one', () => {
  const workers = composeProcesses().filter((part) => part.script === 'worker.js');
  const pollers = new Map<string, number>();
  for (const worker of workers) {
    const config = loadConfig(worker.environment);
    for (const queue of config.worker.queues) pollers.set(queue, (pollers.get(queue) ?? 0) + worker.replicas);
  }
  expect(Object.fromEntries(pollers)).toEqual({ io: 1, compute: 2, inference: 2 });
});
