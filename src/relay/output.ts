// How relay speaks: a line for a person, or (--json) one JSON object a line for a program.

/** A failure to report in one line, and exit 1. */
export class RelayError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface Output {
  json: boolean;
  /** One result: the object with --json, else the text. */
  line(text: string, object: Record<string, unknown>): void;
  /** One failure, on stderr: `relay: message`, or with --json {"type": "error", code, message}. */
  error(err: RelayError): void;
}

export function createOutput(json: boolean, out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Output {
  return {
    json,
    line(text, object) {
      out.write(json ? `${JSON.stringify(object)}\n` : `${text}\n`);
    },
    error(e) {
      const status = e.status ? { status: e.status } : {};
      err.write(json ? `${JSON.stringify({ type: 'error', code: e.code, message: e.message, ...status })}\n` : `relay: ${e.message}\n`);
    },
  };
}

/** Whatever was thrown, as a RelayError (its message on one line). */
export function asRelayError(err: unknown): RelayError {
  if (err instanceof RelayError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new RelayError('failed', message.replace(/\s*\n\s*/g, ' '));
}

/** 21:03:04.123, local time. */
export function clock(d: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}
