import { readFileSync } from 'node:fs';

/** The package's version: the OpenAPI document's `info.version`. */
export const SERVICE_VERSION: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;
