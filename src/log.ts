import pino from 'pino';
import { config } from './config.ts';

/** Structured JSON logs on stdout (stderr for the CLI, whose stdout is its JSON answer). */
export const log = pino({ level: config.LOG_LEVEL, base: { pid: process.pid } }, pino.destination(config.LOG_TO_STDERR ? 2 : 1));
