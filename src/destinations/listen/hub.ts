import type { Destination } from '../../generated/prisma/client.ts';
import { newId } from '../../ids.ts';
import { log } from '../../log.ts';
import type { Runtime } from '../../runtime.ts';
import { receiveLocally, sendTo } from './local.ts';
import { deleteSession, insertSession, loadHandoff, refreshSessions } from './sessions.ts';
import { answerTopic, HEARTBEAT_MS, hubTopic, type HandoffAnswer, type HandoffMessage, type HandoffRequest } from './wire.ts';

type Rt = Pick<Runtime, 'db' | 'pubsub'>;

/** What a listen session's subscription yields. */
export type ListenEvent =
  | { type: 'ready'; sessionId: string; destination: Destination }
  | { type: 'delivery'; sessionId: string; destination: Destination; delivery: HandoffRequest };

/** The answer of the developer's local server to one hand-off, as `relay listen` reports it. */
export interface ListenReport {
  statusCode?: number | null;
  durationMs: number;
  error?: string | null;
  failure?: 'network' | 'timeout' | null;
  snippet?: string | null;
  retryAfter?: string | null;
}

interface Session {
  id: string;
  projectId: string;
  destination: Destination;
  queue: ListenEvent[];
  wake?: () => void;
  closed: boolean;
  /** Hand-offs given to the session and not answered yet: their runner's topic, forgotten after their timeout. */
  pending: Map<string, { replyTo: string; timer: NodeJS.Timeout }>;
}

/** The attempt record keeps this much of the answer's body, as for HTTP destinations. */
const SNIPPET_CHARS = 2_048;
/** NOTIFY payloads are capped at 8000 bytes, topic and envelope included. */
const MAX_ANSWER_BYTES = 7_000;

/**
 * One API process's `relay listen` sessions (CONTRACT §13). A session is a row in listen_sessions
 * naming this process's topic; runners hand deliveries to it there (wire.ts), and the session's
 * reports go back to the runner that holds the attempt. While this process cannot hear its topic
 * (its LISTEN connection is down), its rows are not refreshed, and runners stop picking them.
 */
export class ListenHub {
  readonly id = newId('lsh');
  private readonly sessions = new Map<string, Session>();
  private started: Promise<void> | undefined;
  private requests: AsyncIterableIterator<HandoffMessage> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly rt: Rt) {}

  private start(): Promise<void> {
    if (!this.requests) {
      this.requests = this.rt.pubsub.subscribe<HandoffMessage>(hubTopic(this.id));
      void (async () => {
        for await (const m of this.requests!) void this.receive(m);
      })();
      receiveLocally(this.rt.pubsub, hubTopic(this.id), (m) => void this.receive(m as HandoffMessage));
    }
    this.started ??= this.rt.pubsub.start().catch((err) => {
      this.started = undefined;
      throw err;
    });
    return this.started;
  }

  /** Opens a session of a cli destination (already checked to be the caller's); its events end when `close` is called. */
  async open(projectId: string, destination: Destination): Promise<{ id: string; events: AsyncIterableIterator<ListenEvent> }> {
    await this.start();
    const session: Session = { id: newId('lss'), projectId, destination, queue: [], closed: false, pending: new Map() };
    this.sessions.set(session.id, session);
    try {
      await insertSession(this.rt.db.pool, { id: session.id, projectId, destinationId: destination.id, hub: this.id });
    } catch (err) {
      this.sessions.delete(session.id);
      throw err;
    }
    this.beat();
    this.push(session, { type: 'ready', sessionId: session.id, destination });
    const events: AsyncIterableIterator<ListenEvent> = {
      [Symbol.asyncIterator]: () => events,
      next: async () => {
        while (!session.closed && session.queue.length === 0) await new Promise<void>((r) => (session.wake = r));
        session.wake = undefined;
        if (session.closed) return { value: undefined, done: true };
        return { value: session.queue.shift()!, done: false };
      },
      return: async () => {
        await this.close(session);
        return { value: undefined, done: true };
      },
      throw: async (err) => {
        await this.close(session);
        throw err;
      },
    };
    return { id: session.id, events };
  }

  /** Whether this process holds the session now (and it is the project's). */
  holds(projectId: string, sessionId: string): boolean {
    return this.sessions.get(sessionId)?.projectId === projectId;
  }

  /**
   * A session's report of one hand-off, sent on to the runner waiting for it. False when the
   * hand-off is not this session's, or was given up (its timeout passed: the attempt was a timeout).
   */
  async report(projectId: string, sessionId: string, handoffId: string, r: ListenReport): Promise<boolean> {
    const session = this.sessions.get(sessionId);
    if (!session || session.projectId !== projectId) return false;
    const p = session.pending.get(handoffId);
    if (!p) return false;
    session.pending.delete(handoffId);
    clearTimeout(p.timer);
    const answer: HandoffAnswer = { id: handoffId, durationMs: Math.max(0, Math.round(r.durationMs)) };
    if (r.statusCode != null) answer.statusCode = r.statusCode;
    if (r.error) answer.error = r.error.slice(0, 500);
    if (r.failure) answer.failure = r.failure;
    else if (r.statusCode == null) answer.failure = 'network';
    if (r.snippet != null) answer.snippet = r.snippet.slice(0, SNIPPET_CHARS);
    if (r.retryAfter) answer.retryAfter = r.retryAfter.slice(0, 100);
    // Escaped, 2048 characters may take more than a NOTIFY holds: the snippet gives way.
    while (answer.snippet && Buffer.byteLength(JSON.stringify(answer)) > MAX_ANSWER_BYTES) answer.snippet = answer.snippet.slice(0, Math.floor(answer.snippet.length / 2));
    await this.answer(p.replyTo, answer);
    return true;
  }

  private async receive(m: HandoffMessage) {
    try {
      const session = this.sessions.get(m.session);
      if (!session || session.closed) return await this.answer(m.replyTo, { id: m.id, gone: true });
      let request: HandoffRequest;
      if ('ref' in m) {
        const stored = await loadHandoff(this.rt.db.pool, m.ref);
        // Gone: the runner gave up on it already.
        if (!stored) return;
        request = JSON.parse(stored.toString('utf8')) as HandoffRequest;
      } else request = m;
      // Past its timeout the runner has recorded a timeout: a later report is refused (false).
      const timer = setTimeout(() => session.pending.delete(request.id), request.timeoutMs);
      timer.unref();
      session.pending.set(request.id, { replyTo: request.replyTo, timer });
      this.push(session, { type: 'delivery', sessionId: session.id, destination: session.destination, delivery: request });
    } catch (err) {
      log.warn({ err, handoffId: m.id }, 'a listen hand-off could not be passed on');
    }
  }

  private answer(runner: string, a: HandoffAnswer): Promise<void> {
    return sendTo(this.rt.pubsub, answerTopic(runner), a);
  }

  private push(session: Session, e: ListenEvent) {
    session.queue.push(e);
    session.wake?.();
  }

  private async close(session: Session) {
    if (session.closed) return;
    session.closed = true;
    session.wake?.();
    this.sessions.delete(session.id);
    if (this.sessions.size === 0) this.stopBeating();
    const left = [...session.pending];
    session.pending.clear();
    try {
      await deleteSession(this.rt.db.pool, session.id);
    } catch (err) {
      log.warn({ err, sessionId: session.id }, 'could not delete a closed listen session');
    }
    // Hand-offs it had not answered: their attempts fail now (and are retried), not at their timeout.
    for (const [id, p] of left) {
      clearTimeout(p.timer);
      await this.answer(p.replyTo, { id, error: 'the listener disconnected before it answered', failure: 'network' }).catch(() => {});
    }
  }

  private beat() {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      // Rows of a process that cannot hear its topic must go stale: runners would hand it deliveries it never sees.
      if (!this.rt.pubsub.listening) return;
      refreshSessions(this.rt.db.pool, [...this.sessions.keys()]).catch((err) => log.warn({ err }, 'could not refresh listen sessions'));
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  private stopBeating() {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}

const hubs = new WeakMap<object, ListenHub>();

/** This process's hub (one per pub/sub connection). */
export function listenHub(rt: Rt): ListenHub {
  let hub = hubs.get(rt.pubsub);
  if (!hub) hubs.set(rt.pubsub, (hub = new ListenHub(rt)));
  return hub;
}
