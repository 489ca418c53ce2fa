import { describe, expect, it } from 'vitest';
import { BatchWriter } from '../src/db/batch-writer.ts';

// The result writer (deliveries/record.ts): results arriving while a write is under way share the
// next one; a batch the database refuses goes through onRefused (the recorder writes each alone).
describe('BatchWriter', () => {
  it('writes the first item at once and gathers those that arrive meanwhile into the next write, answering each', async () => {
    const writes: number[][] = [];
    const w = new BatchWriter<number, number>(async (items) => {
      writes.push(items);
      await new Promise((r) => setTimeout(r, 20));
      return items.map((i) => i * 2);
    });
    const answers = await Promise.all([w.add(1), w.add(2), w.add(3)]);
    expect(answers).toEqual([2, 4, 6]);
    expect(writes).toEqual([[1], [2, 3]]);
  });

  it('settles each item of a refused batch as onRefused decides, so one bad item loses no other', async () => {
    const w = new BatchWriter<number, number>(
      async (items) => {
        if (items.includes(13)) throw new Error('refused');
        return items.map((i) => i * 2);
      },
      { onRefused: async (items) => Promise.allSettled(items.map(async (i) => (i === 13 ? Promise.reject(new Error('bad item')) : i * 2))) },
    );
    const first = w.add(1);
    const settled = await Promise.allSettled([first, w.add(13), w.add(4)]);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([2, 'bad item', 8]);
  });
});

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
