// Layout probe: checks every struct layout, constant and status code that the FFI layer (src/ffi/) declares
// against the UCX headers installed on this machine. It generates a C program that prints sizeof/offsetof of
// every layout member and the value of every constant, compiles it with gcc (headers only), runs it, and
// compares its output with the TypeScript values. Needs `gcc` and `libucx-dev`; without them it fails.
import { test } from 'node:test';
// (`import assert from 'node:assert/strict'` does not compile here: it needs allowSyntheticDefaultImports.)
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { LAYOUTS, STATUS_TYPE } from '#ucxx-ts/ffi/layouts.js';
import { CONSTANTS, UCP_API_MAJOR, UCP_API_MINOR } from '#ucxx-ts/ffi/constants.js';
import { STATUS_NAMES } from '#ucxx-ts/ffi/status.js';
import { ucpVersion, ucxProfile } from '#ucxx-ts/ffi/index.js';
import { ucxIncludeDir, ucxIncludeFlags } from './helpers/env.js';

const INSTALL_HINT =
  'The layout probe needs gcc and the UCX development headers (<ucp/api/ucp.h>): install `gcc libucx-dev` ' +
  '(CI installs them).';

/**
 * Keys of CONSTANTS that are not C names, with the C expression of their value. Every other key is
 * printed as the C enum value or macro of the same name.
 */
const DERIVED_CONSTANTS: Readonly<Record<string, string>> = {
  UCP_DATATYPE_CONTIG_1: 'ucp_dt_make_contig(1)',
  UCP_DATATYPE_IOV: 'UCP_DATATYPE_IOV',
};

/** Members of glibc's struct sockaddr_storage, which some layouts declare as nested members. */
const isSockaddrStorageInternal = (path: string): boolean =>
  path.includes('.') && /^_*ss_/.test(path.slice(path.lastIndexOf('.') + 1));

type Kind = 'size' | 'offset' | 'const' | 'api' | 'status' | 'status_size' | 'status_signed';

interface Item {
  readonly kind: Kind;
  /** Unique within its kind: `type` for sizes, `type.member.path` for offsets, the C name otherwise. */
  readonly key: string;
  /** A C expression convertible to the printed type. */
  readonly expr: string;
  /** %llu (unsigned long long) or %d (int). */
  readonly format: 'llu' | 'd';
  readonly expected: bigint;
  /** The layout member path, for offsets. */
  readonly member?: string;
}

function statusTypeInfo(type: string): { size: bigint; signed: boolean } {
  const m = /^(u?)int(8|16|32|64)_t$/.exec(type);
  assert.ok(m, `STATUS_TYPE ${JSON.stringify(type)} is not an exact-width integer type`);
  return { size: BigInt(Number(m[2]) / 8), signed: m[1] === '' };
}

function buildItems(): Item[] {
  const items: Item[] = [];
  for (const layout of LAYOUTS) {
    // A struct the loaded version grew at its end has that version's size (UcxProfile.grownStructs).
    items.push({ kind: 'size', key: layout.name, expr: `sizeof(${layout.name})`, format: 'llu',
      expected: BigInt(ucxProfile().grownStructs[layout.name] ?? layout.size) });
    for (const [member, offset] of Object.entries(layout.offsets)) {
      items.push({ kind: 'offset', key: `${layout.name}.${member}`, member,
        expr: `offsetof(${layout.name}, ${member})`, format: 'llu', expected: BigInt(offset) });
    }
  }
  for (const [name, value] of Object.entries(CONSTANTS as Readonly<Record<string, bigint>>)) {
    items.push({ kind: 'const', key: name, expr: `(${DERIVED_CONSTANTS[name] ?? name})`, format: 'llu',
      expected: value });
  }
  items.push({ kind: 'api', key: 'UCP_API_MAJOR', expr: '(UCP_API_MAJOR)', format: 'llu',
    expected: BigInt(UCP_API_MAJOR) });
  // The headers must be those of the loaded libucp (its minor version); ucxx-ts asks ucp_init_version
  // for the oldest API it supports (UCP_API_MINOR, checked below), which every newer libucp grants.
  items.push({ kind: 'api', key: 'UCP_API_MINOR', expr: '(UCP_API_MINOR)', format: 'llu',
    expected: BigInt(ucpVersion()[1]) });
  for (const [value, name] of STATUS_NAMES) {
    items.push({ kind: 'status', key: name, expr: `(${name})`, format: 'd', expected: BigInt(value) });
  }
  const st = statusTypeInfo(STATUS_TYPE);
  items.push({ kind: 'status_size', key: 'sizeof(ucs_status_t)', expr: 'sizeof(ucs_status_t)', format: 'llu',
    expected: st.size });
  items.push({ kind: 'status_signed', key: '(ucs_status_t)-1 < 0', expr: '((ucs_status_t)-1 < 0)', format: 'd',
    expected: st.signed ? 1n : 0n });
  return items;
}

const PROLOGUE = ['#include <stddef.h>', '#include <stdio.h>', '#include <ucp/api/ucp.h>',
  '#include <ucp/api/ucp_version.h>', ''];

/**
 * One item per line, each in its own function (gcc reports an undeclared identifier once per function), so
 * that a compile error's line number names the item. Returns the source and the item of every line.
 */
function generate(items: readonly Item[]): { source: string; lineItems: Map<number, Item> } {
  const lines = [...PROLOGUE];
  const lineItems = new Map<number, Item>();
  items.forEach((item, i) => {
    const value = item.format === 'llu' ? `(unsigned long long)${item.expr}` : `(int)${item.expr}`;
    lines.push(`static void p${i}(void) { printf("${item.kind}\\t${item.key}\\t%${item.format}\\n", ${value}); }`);
    lineItems.set(lines.length, item); // 1-based line number of the line just pushed
  });
  lines.push('int main(void) {');
  items.forEach((_, i) => lines.push(`  p${i}();`));
  lines.push('  return 0;', '}', '');
  return { source: lines.join('\n'), lineItems };
}

function errorText(err: unknown): string {
  const e = err as { stderr?: Buffer | string; message?: string };
  const stderr = e.stderr === undefined ? '' : e.stderr.toString();
  return stderr !== '' ? stderr : String(e.message ?? err);
}

/** Fails with the install hint unless gcc can compile a program that includes the UCX headers. */
function checkToolchain(dir: string): void {
  const src = join(dir, 'toolchain.c');
  writeFileSync(src, '#include <stddef.h>\n#include <ucp/api/ucp.h>\nint main(void) { return 0; }\n');
  try {
    execFileSync('gcc', ['-fdiagnostics-color=never', ...ucxIncludeFlags(), src, '-o', join(dir, 'toolchain')], { stdio: 'pipe', timeout: 60_000 });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === 'ENOENT' ? 'gcc was not found on PATH' : `gcc could not compile #include <ucp/api/ucp.h>:\n${errorText(err)}`;
    assert.fail(`${INSTALL_HINT}\n${why}`);
  }
}

/** Compiles items into `dir/probe`; returns the items whose lines did not compile (and the compiler output). */
function compile(dir: string, items: readonly Item[]): { failed: Set<Item>; stderr: string } {
  const { source, lineItems } = generate(items);
  const src = join(dir, 'probe.c');
  writeFileSync(src, source);
  try {
    execFileSync('gcc', ['-fdiagnostics-color=never', ...ucxIncludeFlags(), src, '-o', join(dir, 'probe')], { stdio: 'pipe', timeout: 60_000 });
    return { failed: new Set(), stderr: '' };
  } catch (err) {
    const stderr = errorText(err);
    const failed = new Set<Item>();
    for (const m of stderr.matchAll(/probe\.c:(\d+):\d+: (?:error|note: in expansion of macro)/g)) {
      const item = lineItems.get(Number(m[1]));
      if (item !== undefined) failed.add(item);
    }
    assert.ok(failed.size > 0, `the generated probe (${src}) failed to compile, not at any item's line:\n${stderr}`);
    return { failed, stderr };
  }
}

test('FFI layouts, constants and status codes match the headers of the loaded UCX', () => {
  assert.ok(UCP_API_MINOR <= ucpVersion()[1], `ucp_init_version asks for API 1.${UCP_API_MINOR}`);
  console.log(`layout probe: headers in ${ucxIncludeDir()}, libucp ${ucpVersion().join('.')}`);
  const items = buildItems();
  const dir = mkdtempSync(join(tmpdir(), 'ucxx-layout-probe-'));
  let keep = false;
  try {
    checkToolchain(dir);

    // First compile: find the items that do not compile (a member, type or name unknown to the headers).
    const first = compile(dir, items);
    const skipped: Item[] = [];
    const missing: Item[] = [];
    for (const item of first.failed) {
      if (item.kind === 'offset' && isSockaddrStorageInternal(item.member ?? '')) skipped.push(item);
      else missing.push(item);
    }
    for (const item of skipped) {
      console.log(`layout probe: NOTE: ${item.key}: '${item.member}' is not a member of glibc's struct ` +
        'sockaddr_storage on this machine; its offset is NOT checked');
    }
    const probed = items.filter((item) => !first.failed.has(item));
    if (first.failed.size > 0) {
      const second = compile(dir, probed);
      assert.equal(second.failed.size, 0, `the probe still fails to compile without the unknown items:\n${second.stderr}`);
    }

    // Run it and parse `kind \t key \t value` lines.
    const output = execFileSync(join(dir, 'probe'), { encoding: 'utf8', timeout: 30_000 });
    const actual = new Map<string, bigint>();
    const outputLines = output.split('\n').filter((line) => line !== '');
    for (const line of outputLines) {
      const [kind, key, value, ...rest] = line.split('\t');
      assert.ok(kind !== undefined && key !== undefined && value !== undefined && rest.length === 0 &&
        /^-?\d+$/.test(value), `unparsable probe output line: ${JSON.stringify(line)}`);
      // (A key can repeat only if the TS side declares it twice, e.g. one status name under two values;
      // C prints the same value for both, and each TS declaration is compared with it below.)
      actual.set(`${kind}\t${key}`, BigInt(value));
    }
    assert.equal(outputLines.length, probed.length, 'one probe output line per probed item');

    // Compare.
    const problems: string[] = [];
    for (const item of missing) {
      problems.push(`${item.kind} ${item.key}: TS ${item.expected}, C: does not compile (${item.expr} unknown ` +
        'to the installed headers)');
    }
    let compared = 0;
    const counts: Record<Kind, number> = {
      size: 0, offset: 0, const: 0, api: 0, status: 0, status_size: 0, status_signed: 0,
    };
    for (const item of probed) {
      const value = actual.get(`${item.kind}\t${item.key}`);
      if (value === undefined) {
        problems.push(`${item.kind} ${item.key}: TS ${item.expected}, C: missing from the probe output`);
        continue;
      }
      compared++;
      counts[item.kind]++;
      if (value !== item.expected) problems.push(`${item.kind} ${item.key}: TS ${item.expected}, C ${value}`);
    }
    console.log(`layout probe: compared ${compared} items: ${counts.size} sizes, ${counts.offset} offsets, ` +
      `${counts.const} constants, ${counts.api} API version macros, ${counts.status} status codes, ` +
      `status type size+signedness ${counts.status_size + counts.status_signed}/2` +
      (skipped.length > 0 ? `; ${skipped.length} glibc sockaddr_storage members skipped` : ''));

    if (problems.length > 0) keep = true;
    assert.deepEqual(problems, [],
      `${problems.length} FFI declaration(s) disagree with the installed UCX headers (probe kept in ${dir}):\n  ` +
      problems.join('\n  '));

    // The probe must have compared everything it was given, so that it cannot pass by comparing nothing.
    const offsetsDeclared = LAYOUTS.reduce((n, l) => n + Object.keys(l.offsets).length, 0);
    assert.ok(LAYOUTS.length >= 10, `only ${LAYOUTS.length} layouts declared`);
    assert.ok(offsetsDeclared >= 100, `only ${offsetsDeclared} offsets declared`);
    assert.equal(counts.size, LAYOUTS.length, 'every layout size compared');
    assert.equal(counts.offset + skipped.length, offsetsDeclared, 'every offset compared (or reported as skipped)');
    assert.ok(counts.offset >= 100, `only ${counts.offset} offsets compared`);
    assert.equal(counts.const, Object.keys(CONSTANTS).length, 'every constant compared');
    assert.ok(counts.const >= 50, `only ${counts.const} constants compared`);
    assert.equal(counts.api, 2, 'UCP_API_MAJOR and UCP_API_MINOR compared');
    assert.equal(counts.status, STATUS_NAMES.size, 'every status name compared');
    assert.ok(counts.status >= 30, `only ${counts.status} status codes compared`);
    assert.equal(counts.status_size + counts.status_signed, 2, 'ucs_status_t size and signedness compared');
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
});
