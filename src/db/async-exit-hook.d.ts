declare module 'async-exit-hook' { const hook: { unhookEvent(event: string): void }; export default hook; }
