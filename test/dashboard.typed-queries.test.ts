// The dashboard's GraphQL documents are typed from schema.graphql (gql.tada): a field the schema
// does not have fails the dashboard's typecheck. Shown on a real page: the API keys page as it is
// typechecks, and the same page with one selected field renamed does not (compiled in memory with
// the dashboard's tsconfig, the page's copy standing in for the file).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const PAGE = path.resolve('dashboard/src/pages/api-keys.tsx');

/** The dashboard's diagnostics for PAGE with `text` as its content. */
function diagnosticsOf(text: string): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(path.resolve('dashboard/tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
  const host = ts.createCompilerHost(config.options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, onError, create) =>
    path.resolve(name) === PAGE ? ts.createSourceFile(name, text, version, true, ts.ScriptKind.TSX) : getSourceFile(name, version, onError, create);
  const program = ts.createProgram({ rootNames: [PAGE], options: config.options, host });
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? path.relative('.', d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

describe('dashboard queries are typed from schema.graphql', () => {
  const page = readFileSync(PAGE, 'utf8');

  it('the page as it is typechecks', () => {
    expect(diagnosticsOf(page)).toEqual([]);
  }, 120_000);

  it('a renamed field fails the typecheck', () => {
    const renamed = page.replace('items { id name prefix', 'items { id displayName prefix');
    expect(renamed, 'the page still selects `items { id name prefix`').not.toBe(page);
    const errors = diagnosticsOf(renamed);
    expect(errors.join('\n')).toContain('a field of this document is not in schema.graphql');
    expect(errors.every((e) => e.startsWith('dashboard/src/pages/api-keys.tsx'))).toBe(true);
  }, 120_000);

  it('a removed query field fails the typecheck', () => {
    const removed = page.replace('apiKeys(limit: 50, cursor: $cursor)', 'apiKeyList(limit: 50, cursor: $cursor)');
    expect(removed).not.toBe(page);
    expect(diagnosticsOf(removed).join('\n')).toContain('a field of this document is not in schema.graphql');
  }, 120_000);
});
