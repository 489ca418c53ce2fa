// The dashboard's cli destinations (CONTRACT §13) in Chromium: added from the webhook page, shown
// with whether a `relay listen` session is connected now (a real one, a child process), and the
// command that connects one. Skipped like test/dashboard.e2e.test.ts when Chromium is missing.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from '../src/users/service.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startRelay, type RelayProcess } from './support/relay.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => p && existsSync(p));
if (!CHROMIUM) {
  if (process.env.CI) throw new Error('[dashboard listen] no Chromium found, and CI is set (apt-get install -y chromium, or set CHROMIUM_PATH).');
  console.warn('\n[dashboard listen] SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH).\n');
}

describe.skipIf(!CHROMIUM)('dashboard: cli destinations', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let listen: RelayProcess | undefined;

  beforeAll(async () => {
    app = await startTestApp({ worker: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await (await browser.newContext({ baseURL: app.url, viewport: { width: 1280, height: 900 } })).newPage();
    page.setDefaultTimeout(15_000);
  });
  afterAll(async () => {
    await listen?.stop();
    await browser?.close();
    await app?.stop();
  });

  it('adds a cli destination, and shows whether relay listen is connected now, with the command', async () => {
    const { apiKey, projectId } = await app.project('free');
    await createUser(app.rt, { email: 'dev@example.com', projectId, password: 'developer password 1' });
    const created = await app.api(apiKey, 'POST', '/v1/webhooks', { name: 'Local', url: 'https://example.com/hook' });
    expect(created.status).toBe(201);
    const webhookId = created.body.id as string;

    await page.goto('/dashboard/login');
    await page.getByLabel('Email').fill('dev@example.com');
    await page.getByLabel('Password').fill('developer password 1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
    await page.goto(`/dashboard/webhooks/${webhookId}`);
    await page.getByRole('heading', { name: 'Local', level: 1 }).waitFor();

    await page.getByText('Add a destination').click();
    const form = page.locator('form').filter({ has: page.getByRole('button', { name: 'Add destination' }) });
    await form.getByLabel('Name').fill('laptop');
    await form.getByLabel('Type').selectOption('cli');
    await form.getByLabel('Config (JSON)').fill('{}');
    await page.getByRole('button', { name: 'Add destination' }).click();
    const card = page.locator('li.card').filter({ has: page.getByRole('heading', { name: 'laptop', level: 3 }) });
    await card.waitFor();
    await card.getByText('no listener', { exact: true }).waitFor();
    const destinations = (await app.api(apiKey, 'GET', `/v1/webhooks/${webhookId}/destinations`)).body.items;
    const laptop = destinations.find((d: any) => d.name === 'laptop');
    expect(laptop).toMatchObject({ type: 'cli', config: {}, listenerConnected: false });
    const command = `relay listen ${webhookId} --destination ${laptop.id} --forward-to http://localhost:4000/webhooks`;
    expect(await card.getByLabel("The command that forwards this destination's deliveries to a local server").textContent()).toBe(command);

    listen = startRelay(['listen', webhookId, '--destination', laptop.id, '--forward-to', 'http://127.0.0.1:9/', '--json'], { RELAY_BASE_URL: app.url, RELAY_API_KEY: apiKey });
    await listen.waitLine((l) => l.type === 'ready');
    // The page asks again every 5 s.
    await card.getByText('listener connected', { exact: true }).waitFor({ timeout: 12_000 });

    await listen.stop();
    await card.getByText('no listener', { exact: true }).waitFor({ timeout: 12_000 });
  });
});
