import type pg from 'pg';
import { newId } from '../../ids.ts';
import { log } from '../../log.ts';
import type { PgPubSub } from '../../db/pubsub.ts';
import { isLocal, receiveLocally, sendTo } from '../listen/local.ts';
import { deleteHandoff, liveSessions, storeHandoff, type LiveSession } from '../listen/sessions.ts';
import { answerTopic, hubTopic, NO_LISTENER, type HandoffAnswer, type HandoffRequest } from '../listen/wire.ts';
import type { OutboundResult } from '../../outbound/http-client.ts';
import { elapsedSince, type DestinationSend, type DestinationSnapshot } from './types.ts';
import { USER_AGENT } from './webhook.ts';

/** What the cli sender needs of its process: the database and its pub/sub. */
export interface ListenChannel {
  pool: pg.Pool;
  pubsub: PgPubSub;
}

// NOTIFY payloads are capped at 8000 bytes; a larger request goes through listen_handoffs.
const MAX_INLINE = 7_000;
/** Sessions a hand-off may be offered to before the attempt gives up (each that is gone costs a round trip). */
const MAX_OFFERS = 3;
/**
 * A destination's sessions are read again after this long: a session that opened meanwhile gets
 * deliveries a little later, one that closed answers `gone` (and the list is read again). An empty
 * list is never kept: the first session of a destination is found at once.
 */
const SESSIONS_TTL_MS = 1_000;

/**
 * The `cli` destination (CONTRACT §13): the request the `webhook` sender would send, handed to one
 * of the destination's `relay listen` sessions through the API process that holds it, and its
 * answer awaited here, on the runner that holds the attempt, for the webhook's timeoutMs. The
 * sessions of a destination take its deliveries in turn; none: `no listener connected`, a network
 * failure the retry policy retries. The server itself never connects anywhere for it.
 */
export function createCliSender(channel: ListenChannel) {
  const runner = newId('lsr');
  const pending = new Map<string, (a: HandoffAnswer) => void>();
  const turns = new Map<string, number>();
  const known = new Map<string, { sessions: LiveSession[]; at: number }>();
  let answers: AsyncIterableIterator<HandoffAnswer> | undefined;
  let listening: Promise<void> | undefined;
  let closed = false;
  let stopLocal: (() => void) | undefined;

  function listen(): Promise<void> {
    if (!answers) {
      const settle = (a: HandoffAnswer | undefined) => a && pending.get(a.id)?.(a);
      answers = channel.pubsub.subscribe<HandoffAnswer>(answerTopic(runner));
      void (async () => {
        for await (const a of answers!) settle(a);
      })();
      stopLocal = receiveLocally(channel.pubsub, answerTopic(runner), (a) => settle(a as HandoffAnswer));
    }
    // A LISTEN that could not be set up is tried again by the next attempt (pubsub reconnects by itself).
    listening ??= channel.pubsub.start().catch((err) => {
      listening = undefined;
      throw err;
    });
    return listening;
  }

  async function sessionsOf(destinationId: string): Promise<LiveSession[]> {
    const kept = known.get(destinationId);
    if (kept && performance.now() - kept.at < SESSIONS_TTL_MS) return kept.sessions;
    const sessions = await liveSessions(channel.pool, destinationId);
    if (known.size > 10_000) known.clear();
    if (sessions.length) known.set(destinationId, { sessions, at: performance.now() });
    else known.delete(destinationId);
    return sessions;
  }

  /** The sessions in turn: each delivery of a destination goes to the next one. */
  function nextOf(destinationId: string, sessions: LiveSession[]): LiveSession {
    const turn = turns.get(destinationId) ?? 0;
    if (turns.size > 10_000) turns.clear();
    turns.set(destinationId, turn + 1);
    return sessions[turn % sessions.length];
  }

  async function offer(session: LiveSession, request: HandoffRequest, waitMs: number): Promise<HandoffAnswer | 'timeout'> {
    const topic = hubTopic(session.hub);
    const local = isLocal(channel.pubsub, topic);
    const text = local ? '' : JSON.stringify(request);
    const stored = !local && Buffer.byteLength(text) > MAX_INLINE;
    const answered = new Promise<HandoffAnswer | 'timeout'>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), waitMs);
      pending.set(request.id, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
    });
    try {
      if (stored) await storeHandoff(channel.pool, request.id, session.project_id, Buffer.from(text));
      const message = stored ? { ref: request.id, id: request.id, session: request.session, replyTo: request.replyTo } : request;
      await sendTo(channel.pubsub, topic, message);
      return await answered;
    } finally {
      pending.delete(request.id);
      if (stored) void deleteHandoff(channel.pool, request.id).catch((err) => log.warn({ err }, 'could not delete a listen hand-off'));
    }
  }

  return {
    /** Hands one delivery to a listen session and waits for its answer; never throws. */
    async send(destination: DestinationSnapshot, req: DestinationSend): Promise<OutboundResult> {
      const started = performance.now();
      const network = (error: string): OutboundResult => ({ durationMs: elapsedSince(started), error, failure: 'network' });
      try {
        if (closed) return network('the runner is stopping');
        await listen();
        // Answers published while this runner does not LISTEN would never reach it.
        if (!channel.pubsub.listening) return network('this runner cannot hear answers now (its LISTEN connection is down)');
        let sessions = await sessionsOf(destination.id);
        let timedOut = false;
        for (let offers = 0; sessions.length && offers < MAX_OFFERS; offers++) {
          const session = nextOf(destination.id, sessions);
          const waitMs = req.timeoutMs - elapsedSince(started);
          if (waitMs <= 0) {
            timedOut = true;
            break;
          }
          const request: HandoffRequest = {
            id: newId('lho'),
            session: session.id,
            replyTo: runner,
            ...req.ids,
            method: 'POST',
            headers: { 'user-agent': USER_AGENT, ...req.dispatch.headers, ...req.signing },
            bodyBase64: req.dispatch.body.toString('base64'),
            timeoutMs: waitMs,
          };
          const answer = await offer(session, request, waitMs);
          // listen's own clock ran out first: the attempt is the webhook's timeout all the same.
          if (answer === 'timeout' || answer.failure === 'timeout') {
            timedOut = true;
            break;
          }
          if (answer.gone) {
            known.delete(destination.id);
            sessions = sessions.filter((s) => s.id !== session.id);
            continue;
          }
          return {
            statusCode: answer.statusCode,
            durationMs: answer.durationMs ?? elapsedSince(started),
            snippet: answer.snippet,
            headers: answer.retryAfter ? { 'retry-after': answer.retryAfter } : undefined,
            error: answer.error,
            failure: answer.failure,
          };
        }
        if (timedOut) return { durationMs: Math.max(elapsedSince(started), req.timeoutMs), error: `timed out after ${req.timeoutMs} ms`, failure: 'timeout' };
        return network(NO_LISTENER);
      } catch (err) {
        return network(`cli: ${(err as Error).message}`);
      }
    },
    async close() {
      closed = true;
      for (const [id, settle] of pending) settle({ id, error: 'the runner is stopping', failure: 'network' });
      stopLocal?.();
      await answers?.return?.();
    },
  };
}

export type CliSender = ReturnType<typeof createCliSender>;
