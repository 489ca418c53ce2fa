import { describe, expect, it } from 'vitest';
import { BatchWriter } from '../src/db/batch-writer.ts';

// The result writer's linger (deliveries/record.ts): results that may wait share one write;
// one that may not starts the write at once, taking those gathered so far along.
describe('BatchWriter linger', () => {
  const writer = (lingerMs: number) => {
    const writes: number[][] = [];
    const w = new BatchWriter<number, number>(async (items) => {
      writes.push(items);
      return items.map((i) => i * 2);
    }, { lingerMs });
    return { w, writes };
  };

  it('gathers items that may wait into one write, and answers each', async () => {
    const { w, writes } = writer(30);
    const answers = await Promise.all([w.add(1, { wait: true }), w.add(2, { wait: true }), w.add(3, { wait: true })]);
    expect(answers).toEqual([2, 4, 6]);
    expect(writes).toEqual([[1, 2, 3]]);
  });

  it('writes at once for an item that may not wait, with those waiting', async () => {
    const { w, writes } = writer(60_000);
    const first = w.add(1, { wait: true });
    // Without the urgent item the first would wait a minute: the test would time out.
    const answers = await Promise.all([first, w.add(2)]);
    expect(answers).toEqual([2, 4]);
    expect(writes).toEqual([[1, 2]]);
  });

  it('writes each at once without a linger', async () => {
    const { w, writes } = writer(0);
    await w.add(1, { wait: true });
    await w.add(2, { wait: true });
    expect(writes).toEqual([[1], [2]]);
  });
});
