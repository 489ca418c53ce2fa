// When this process got its stop signal (SIGTERM or SIGINT: bootstrap.ts's serveUntilSignal), or
// 0. Ctrl-C reaches the whole process group, the embedded PostgreSQL too: connections that end
// after it are the stop's doing, and are logged as such rather than as faults.
let signalledAt = 0;

export function stopSignalledAt(): number {
  return signalledAt;
}

export function noteStopSignal(): void {
  signalledAt = Date.now();
}
