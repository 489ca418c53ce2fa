// Preloaded into every process the harness starts: when the harness goes away (even killed),
// the IPC channel closes and the child stops itself the way it would on `kill`.
if (process.connected) process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
