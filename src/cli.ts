// Admin CLI: `npm run cli -- <command>`. Prints one JSON object on stdout per command.
//   project create --name NAME [--tier TIER]
//   project set-tier PROJECT_ID TIER
//   project set-quota PROJECT_ID QUOTA VALUE
//   api-key create PROJECT_ID [--name NAME]
//   api-key list PROJECT_ID
//   api-key revoke PROJECT_ID KEY_ID
//   user create --email EMAIL --project PROJECT_ID [--password PASSWORD]
import { parseArgs } from 'node:util';
import { migrateDatabase, resolveDatabase } from './bootstrap.ts';
import { connectDatabase } from './db/client.ts';
import { DomainError } from './errors.ts';
import { createUser } from './users/service.ts';
import { createApiKey, createProject, listApiKeys, revokeApiKey, setProjectQuota, setProjectTier } from './projects/service.ts';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { name: { type: 'string' }, tier: { type: 'string' }, email: { type: 'string' }, project: { type: 'string' }, password: { type: 'string' } },
});

function usage(): never {
  process.stderr.write(
    'usage:\n  project create --name NAME [--tier TIER]\n  project set-tier PROJECT_ID TIER\n  project set-quota PROJECT_ID QUOTA VALUE\n  api-key create PROJECT_ID [--name NAME]\n  api-key list PROJECT_ID\n  api-key revoke PROJECT_ID KEY_ID\n  user create --email EMAIL --project PROJECT_ID [--password PASSWORD]\n',
  );
  process.exit(2);
}

const [group, command, ...rest] = positionals;
if (!group || !command) usage();

const { url, directUrl, embedded } = await resolveDatabase({ allowEmbedded: true });
const db = connectDatabase(url, 2, 2, 0, { directUrl, runner: false });
const rt = { db };
try {
  await migrateDatabase(directUrl);
  let out: unknown;
  const key = `${group} ${command}`;
  if (key === 'project create') {
    if (!values.name) usage();
    const { project, secret } = await createProject(rt, { name: values.name, tier: values.tier ?? 'free' });
    out = { project, apiKey: secret };
  } else if (key === 'project set-tier') {
    if (rest.length !== 2) usage();
    out = { project: await setProjectTier(rt, rest[0], rest[1]) };
  } else if (key === 'project set-quota') {
    if (rest.length !== 3) usage();
    out = { project: await setProjectQuota(rt, rest[0], rest[1], rest[2]) };
  } else if (key === 'api-key create') {
    if (rest.length !== 1) usage();
    const { apiKey, secret } = await createApiKey(rt, rest[0], values.name ?? 'default');
    out = { apiKey: { ...apiKey, hash: undefined }, key: secret };
  } else if (key === 'api-key list') {
    if (rest.length !== 1) usage();
    out = { items: (await listApiKeys(rt, rest[0])).map((k) => ({ ...k, hash: undefined })) };
  } else if (key === 'api-key revoke') {
    if (rest.length !== 2) usage();
    const k = await revokeApiKey(rt, rest[0], rest[1]);
    out = { apiKey: { ...k, hash: undefined } };
  } else if (key === 'user create') {
    if (rest.length !== 0 || !values.email || !values.project) usage();
    // The password is printed only when it was generated here.
    const { user, password } = await createUser(rt, { email: values.email, projectId: values.project, password: values.password });
    out = values.password === undefined ? { user, password } : { user };
  } else usage();
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (err) {
  if (err instanceof DomainError) {
    process.stderr.write(JSON.stringify(err.toBody()) + '\n');
    process.exitCode = 1;
  } else throw err;
} finally {
  await db.close();
  await embedded?.stop();
}
// Exit explicitly, with the code set above, whatever handles or timers are still open.
process.exit(process.exitCode ?? 0);
