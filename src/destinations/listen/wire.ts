// What runners and API processes say to each other about `cli` destinations (CONTRACT §13), over
// PostgreSQL NOTIFY (db/pubsub.ts): a runner hands one delivery to the API process that holds the
// chosen `relay listen` session (`hubTopic`), and that process sends the session's answer back to
// the runner that holds the attempt (`answerTopic`). They share nothing else but the database.

/** The topic of one API process's listen sessions. */
export const hubTopic = (hub: string) => `listen-hub:${hub}`;
/** The topic of one runner's pending hand-offs. */
export const answerTopic = (runner: string) => `listen-answer:${runner}`;

/** The error of an attempt to a cli destination that no session takes. */
export const NO_LISTENER = 'no listener connected';

/** One delivery, as the server would have sent it, handed to one session. */
export interface HandoffRequest {
  id: string;
  /** The session chosen by the runner. */
  session: string;
  /** The runner's answer topic. */
  replyTo: string;
  deliveryId: string;
  eventId: string;
  webhookId: string;
  method: string;
  /** Every header the request carries: content type, custom headers, the Standard Webhooks signature. */
  headers: Record<string, string>;
  bodyBase64: string;
  /** The webhook's timeoutMs: the runner waits this long for the answer, from the hand-off on. */
  timeoutMs: number;
}

/** On the hub topic: the request itself, or (too large for a NOTIFY) the id of its listen_handoffs row. */
export type HandoffMessage = HandoffRequest | { ref: string; session: string; replyTo: string; id: string };

/** What became of a hand-off, for the runner waiting on it. */
export interface HandoffAnswer {
  id: string;
  /** The session is not (any more) on the process the runner picked: the runner picks another. */
  gone?: true;
  statusCode?: number;
  durationMs?: number;
  error?: string;
  failure?: 'network' | 'timeout';
  /** First bytes of the local server's answer. */
  snippet?: string;
  retryAfter?: string;
}

/** A session's process refreshes its rows this often; a row unrefreshed for SESSION_STALE_SECONDS no longer counts. */
export const HEARTBEAT_MS = 10_000;
export const SESSION_STALE_SECONDS = 30;
