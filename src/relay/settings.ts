// Where the service is and which key to use: flags first, then RELAY_BASE_URL and RELAY_API_KEY.
// The relay command is a client of the service: it imports nothing of the server (see
// .dependency-cruiser.cjs), only talks to it over HTTP and WebSocket.
import { RelayError } from './output.ts';

export interface ConnectionOptions {
  baseUrl?: string;
  apiKey?: string;
  json?: boolean;
}

export interface Connection {
  baseUrl: string;
  apiKey: string;
}

export const DEFAULT_BASE_URL = 'http://localhost:3000';

export function resolveConnection(opts: ConnectionOptions, env: NodeJS.ProcessEnv): Connection {
  const baseUrl = (opts.baseUrl ?? env.RELAY_BASE_URL ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) {
    throw new RelayError('invalid_base_url', `--base-url must be an http or https URL (got ${JSON.stringify(baseUrl)}).`);
  }
  const apiKey = opts.apiKey ?? env.RELAY_API_KEY;
  if (!apiKey) throw new RelayError('no_api_key', 'No API key: pass --api-key KEY or set RELAY_API_KEY (npm start prints one on its first run).');
  return { baseUrl, apiKey };
}
