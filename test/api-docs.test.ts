/**
 * Every public export has a doc comment, and every value (class, function, constant) and every public
 * method of an exported class has a usage example: a TypeDoc `@example` tag with a fenced code block.
 * Interfaces, type aliases and properties/getters need a doc comment only. The public API is what
 * src/index.ts exports; the check walks it with the TypeScript compiler (one program, no emit).
 */
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import ts from 'typescript';

/** The repository root: the compiled test runs from build/test/. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const FENCE = '`'.repeat(3);

/** The compiler options of tsconfig.json (what `npm run build` and TypeDoc use), without emit. */
function compilerOptions(): ts.CompilerOptions {
  const configPath = path.join(ROOT, 'tsconfig.json');
  const read = ts.readConfigFile(configPath, (file) => ts.sys.readFile(file));
  if (read.error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT, undefined, configPath);
  return { ...parsed.options, noEmit: true };
}

/** What is missing in the docs of the public API, one line per item, and how many items were checked. */
function missingDocs(): { missing: string[]; total: number } {
  const entry = path.join(ROOT, 'src', 'index.ts');
  const program = ts.createProgram([entry], compilerOptions());
  const checker = program.getTypeChecker();
  const index = program.getSourceFile(entry);
  assert.ok(index !== undefined, `${entry} is not in the program`);
  const moduleSymbol = checker.getSymbolAtLocation(index);
  assert.ok(moduleSymbol !== undefined, 'src/index.ts is not a module');

  const hasDoc = (symbol: ts.Symbol): boolean => symbol.getDocumentationComment(checker).length > 0;
  const hasExample = (symbol: ts.Symbol): boolean => symbol.getJsDocTags(checker).some((tag) =>
    tag.name === 'example' && (tag.text ?? []).map((part) => part.text).join('').includes(FENCE));
  const where = (declaration: ts.Declaration | undefined): string => {
    if (declaration === undefined) return '?';
    const file = declaration.getSourceFile();
    const { line } = file.getLineAndCharacterOfPosition(declaration.getStart());
    return `${path.relative(ROOT, file.fileName)}:${line + 1}`;
  };

  const missing: string[] = [];
  let total = 0;
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declaration = symbol.valueDeclaration ?? symbol.declarations?.[0];
    total++;
    // A value needs an example, also where a type of the same name is declared beside it (the status
    // error classes: `export const CanceledError = ...` and `export type CanceledError = ...`).
    const isValue = (symbol.flags & ts.SymbolFlags.Value) !== 0;
    if (!hasDoc(symbol)) missing.push(`${exported.name} (${where(declaration)}): no doc comment`);
    else if (isValue && !hasExample(symbol)) missing.push(`${exported.name} (${where(declaration)}): no @example`);

    if ((symbol.flags & ts.SymbolFlags.Class) === 0 || declaration === undefined) continue;
    const instance = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol));
    const statics = checker.getPropertiesOfType(checker.getTypeOfSymbolAtLocation(symbol, declaration))
      .filter((member) => member.name !== 'prototype');
    for (const member of [...instance, ...statics]) {
      const memberDeclaration = member.declarations?.[0];
      // Inherited from Node (EventEmitter, Error): documented there.
      if (memberDeclaration === undefined || memberDeclaration.getSourceFile().fileName.includes('node_modules')) continue;
      if (ts.getCombinedModifierFlags(memberDeclaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
      // #private names, and symbol-keyed members (Symbol.asyncIterator, Symbol.dispose, internal symbols).
      if (member.name.startsWith('#') || member.name.startsWith('__')) continue;
      if (ts.getJSDocTags(memberDeclaration).some((tag) => tag.tagName.text === 'internal')) continue;
      total++;
      const name = `${exported.name}.${member.name} (${where(memberDeclaration)})`;
      if (!hasDoc(member)) missing.push(`${name}: no doc comment`);
      else if ((member.flags & ts.SymbolFlags.Method) !== 0 && !hasExample(member)) missing.push(`${name}: no @example`);
    }
  }
  return { missing, total };
}

test('every public export has a doc comment, and every value and public method an @example', () => {
  const { missing, total } = missingDocs();
  assert.ok(total > 100, `only ${total} public items found: is src/index.ts read correctly?`);
  assert.deepEqual(missing, [], `${missing.length} of ${total} public items lack docs:\n  ${missing.join('\n  ')}`);
});
