// Regenerates the TypeScript client's types (clients/typescript/schema.ts) from the OpenAPI
// document the service serves; a test fails when the committed file is stale.
// `npm run client:generate`; `npm run client:generate -- --document openapi.json` also writes the document.
import { writeFileSync } from 'node:fs';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { schema } from '../src/schema/index.ts';
import { createRestSofa, restOpenApiDocument } from '../src/http/rest.ts';

export const CLIENT_TYPES_PATH = 'clients/typescript/schema.ts';

/** The generated types of one document, exactly as committed. */
export async function clientTypesOf(document: object): Promise<string> {
  const ast = await openapiTS(structuredClone(document) as any, { silent: true });
  return `${COMMENT_HEADER}// Regenerate with \`npm run client:generate\`.\n\n${astToString(ast)}`;
}

export async function serviceDocument() {
  return restOpenApiDocument(createRestSofa(schema), schema);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const document = await serviceDocument();
  writeFileSync(CLIENT_TYPES_PATH, await clientTypesOf(document));
  console.log(`wrote ${CLIENT_TYPES_PATH}`);
  const at = process.argv.indexOf('--document');
  if (at !== -1 && process.argv[at + 1]) {
    writeFileSync(process.argv[at + 1], `${JSON.stringify(document, null, 2)}\n`);
    console.log(`wrote ${process.argv[at + 1]}`);
  }
}
