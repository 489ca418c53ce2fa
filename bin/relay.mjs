#!/usr/bin/env node
// The package's `relay` command (CONTRACT §13): src/relay/main.ts through tsx's loader, so a checkout
// runs it after `npm ci` with no build step. In a checkout: `npm run -s relay -- listen …`.
import { register } from 'tsx/esm/api';

register();
const { runRelay } = await import('../src/relay/main.ts');
await runRelay(process.argv, process.env);
