// Load process of the email-ingest scenario: `connections` SMTP clients on loopback, each sending
// one message after the other (MAIL, RCPT, DATA) for `warmup` then `duration` seconds. The latency
// is from the end of DATA (the final dot sent) to the server's 250.
import net from 'node:net';
import { serveLoadProcess } from './protocol.ts';

export interface SmtpLoadInput {
  port: number;
  rcpt: string;
  connections: number;
  warmup: number;
  duration: number;
  /** The message, CRLF line ends, dot-stuffed. */
  message: string;
}

export interface SmtpLoadOutput {
  mails: number;
  failures: number;
  elapsed: number;
  p50Ms: number;
  p99Ms: number;
}

/** One SMTP client: a queue of replies read off the socket. */
async function client(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  let buffer = '';
  const waiting: ((reply: string) => void)[] = [];
  const replies: string[] = [];
  socket.on('data', (d) => {
    buffer += d.toString('latin1');
    for (;;) {
      const m = /^\d{3} .*\r\n/m.exec(buffer);
      if (!m) break;
      const end = m.index + m[0].length;
      const reply = buffer.slice(0, end);
      buffer = buffer.slice(end);
      const w = waiting.shift();
      if (w) w(reply);
      else replies.push(reply);
    }
  });
  const closed = new Promise<never>((_, reject) => socket.on('close', () => reject(new Error('connection closed'))));
  closed.catch(() => {});
  const next = () => Promise.race([new Promise<string>((r) => (replies.length ? r(replies.shift()!) : waiting.push(r))), closed]);
  await next();
  const command = async (line: string) => {
    socket.write(`${line}\r\n`);
    return next();
  };
  await command('EHLO bench.test');
  return { socket, command, next };
}

serveLoadProcess<SmtpLoadInput, SmtpLoadOutput>(async (input) => {
  const latencies: number[] = [];
  let failures = 0;
  let measuring = false;
  let stop = false;
  const loop = async () => {
    const c = await client(input.port);
    while (!stop) {
      const mail = await c.command('MAIL FROM:<bench@sender.test>');
      const rcpt = await c.command(`RCPT TO:<${input.rcpt}>`);
      const data = await c.command('DATA');
      if (!mail.startsWith('250') || !rcpt.startsWith('250') || !data.startsWith('354')) {
        failures++;
        await c.command('RSET');
        continue;
      }
      c.socket.write(input.message);
      const t0 = performance.now();
      c.socket.write('\r\n.\r\n');
      const answer = await c.next();
      const ms = performance.now() - t0;
      if (!measuring) continue;
      if (answer.startsWith('250')) latencies.push(ms);
      else failures++;
    }
    c.socket.end('QUIT\r\n');
  };
  const loops = Array.from({ length: input.connections }, loop);
  await new Promise((r) => setTimeout(r, input.warmup * 1000));
  measuring = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, input.duration * 1000));
  measuring = false;
  const elapsed = (performance.now() - started) / 1000;
  stop = true;
  await Promise.allSettled(loops);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] : 0);
  return { mails: latencies.length, failures, elapsed, p50Ms: Math.round(at(0.5) * 10) / 10, p99Ms: Math.round(at(0.99) * 10) / 10 };
});
