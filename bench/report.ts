/**
 * Presentation of a bench report (the JSON that bench/run.ts writes): the console table, docs/benchmarks.md
 * and docs/benchmarks.svg. No dependencies; the SVG is written by hand. The types of the report are here too:
 * bench/run.ts builds one, and `--from FILE` reads one back.
 */

/** Order of the columns, and of the lines in the plot. */
export const IMPLEMENTATIONS = ['ucxx-ts', 'ucx_perftest', 'net-tcp', 'net-unix'] as const;

export type Implementation = (typeof IMPLEMENTATIONS)[number];

/** Which figure a test is compared by: latency (us, p50, lower is better), bandwidth (MB/s) or rate (msg/s). */
export type Kind = 'latency' | 'bandwidth' | 'rate';

export interface LatencyFigures {
  p50: number | null;
  avg: number | null;
  p99: number | null;
  /** ucxx-ts only (ucx_perftest reports one percentile per run, net-baseline these three). */
  p90?: number | null;
  p999?: number | null;
}

/** One run of one implementation at one point (or the median round of several). */
export interface Measurement {
  status: 'ok' | 'failed' | 'skipped' | 'n/a';
  latency_us?: LatencyFigures;
  bandwidth_MBps?: number | null;
  message_rate?: number | null;
  iterations?: number;
  command?: string;
  wall_s?: number;
  error?: string;
  detail?: Record<string, unknown>;
  /** Internal to bench/run.ts: removed before the report is written. */
  timedOut?: boolean;
  /** Every round's figure, where the point ran several rounds. */
  rounds?: (number | null)[];
}

/** One test and size: every implementation's measurement, figure and ratio. */
export interface ResultRecord {
  test: string;
  size: number;
  kind: Kind;
  metric: string;
  unit: string;
  better: 'lower' | 'higher';
  iterations: number;
  warmup: number;
  outstanding: number;
  equivalents: { ucx_perftest: string | null; net: string | null };
  note: string | null;
  /** By implementation. */
  figures: Record<string, number | null>;
  /** By 'ucxx-ts/<other implementation>'. */
  ratios: Record<string, number | null>;
  ratioRounds: Record<string, number[]>;
  /** By implementation. */
  raw: Record<string, Measurement>;
  /**
   * 8 B latency points: by implementation, each statistic's median over the rounds (the mean and the
   * tail move from round to round independently of the median that picks `raw`'s round).
   */
  tails?: Record<string, LatencyFigures>;
}

export interface MachineInfo {
  os: string;
  distro: string | null;
  arch: string;
  hostname: string;
  cpuModel: string | null;
  cpuCount: number;
  totalMemoryBytes: number;
  node: string;
  ucx: { ucxxTs: string | null; ucxPerftest: string | null; package: string | null };
  ucxxTsVersion: string;
  /** Optional: not in every stored report. */
  git?: { commit: string | null; dirty: boolean | null };
}

export interface Failure {
  test: string;
  size: number;
  implementation: string;
  status: 'failed' | 'skipped';
  command: string | null;
  error: string | null;
}

/** The JSON of bench/results/*.json (schema ucxx-ts-bench/1). */
export interface BenchReport {
  schema: string;
  date: string;
  mode: 'full' | 'short';
  durationS: number;
  machine: MachineInfo & { loadAverage: { start: number[]; end: number[] } };
  config: {
    order: string;
    /** Optional: not in every stored report. */
    rounds?: number;
    /** Optional: not in every stored report. */
    extraPairs?: number;
    ucxxPerf: { memory: string; progress: string; outstanding: number };
    ucxPerftest: string;
    net: string;
    latencyMetric: string;
    ratio: string;
    /** --two-hosts: where the two sides ran (absent: both on this host). */
    hosts?: string;
  };
  implementations: readonly string[];
  results: ResultRecord[];
  failures: Failure[];
  /** bench/ffi-floor.ts: ns per call of a bare koffi call and of the raw libucp calls beside ucxx-ts's. */
  ffiFloor?: { name: string; ns: number; raw?: string; ratio?: number }[];
  /** ucxx-ts beside ucxx C++ and ucxx Python (absent: not run, e.g. --no-ucxx or an older report). */
  ucxx?: UcxxComparison;
}

/** One column of the ucxx comparison (bench/run.ts runUcxxComparison). */
export interface UcxxColumn {
  key: string;
  label: string;
  /** How it makes progress, and its API style. */
  mode: string;
  /** The UCX it ran on (its own version string), or null where it did not run. */
  ucx: string | null;
}

/** One test, size and error-handling mode of the ucxx comparison: a figure per column. */
export interface UcxxRow {
  test: string;
  size: number;
  kind: 'latency' | 'bandwidth';
  /** Mean one-way latency (us) or bandwidth (MB/s = 10^6 bytes/s). */
  unit: string;
  errorHandling: 'peer' | 'none';
  iterations: number;
  warmup: number;
  /** By column key. */
  figures: Record<string, number | null>;
  raw: Record<string, Measurement>;
  /** By 'ucxx-ts:spin/<column>', 'ucxx-ts/<column>' and 'ucxx-ts:await/<column>'. */
  ratios: Record<string, number | null>;
}

/** A target of the comparison: shown beside the figures, not asserted. */
export interface UcxxTarget {
  what: string;
  ratio: string;
  value: number | null;
  /** The bound, and which side of it is met: ratio <= bound ('max') or >= bound ('min'). */
  bound: number;
  side: 'max' | 'min';
}

/** ucxx-ts beside ucxx C++ (bench/ucxx-cpp/ucxx_bench.cpp) and ucxx Python (python -m ucxx.benchmarks.send_recv). */
export interface UcxxComparison {
  columns: UcxxColumn[];
  rows: UcxxRow[];
  targets: UcxxTarget[];
  notes: string[];
}

const LABELS: Record<Implementation, string> = {
  'ucxx-ts': 'ucxx-ts',
  ucx_perftest: 'ucx_perftest (C)',
  'net-tcp': 'Node net, TCP',
  'net-unix': 'Node net, Unix socket',
};

export function formatSize(size: number): string {
  if (size >= 1024 * 1024 && size % (1024 * 1024) === 0) return `${size / (1024 * 1024)} MiB`;
  if (size >= 1024 && size % 1024 === 0) return `${size / 1024} KiB`;
  return `${size} B`;
}

/** A figure with about three significant digits. */
export function formatFigure(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return '';
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function formatRatio(x: number | null | undefined): string {
  if (x === null || x === undefined || !Number.isFinite(x)) return '';
  if (x >= 100) return `${x.toFixed(0)}x`;
  if (x >= 10) return `${x.toFixed(1)}x`;
  if (x >= 0.01) return `${x.toFixed(2)}x`;
  return `${x.toPrecision(2)}x`;
}

/** What to print in a cell: the figure, '-' for no equivalent, or why it is missing. */
function cell(r: ResultRecord, impl: string): string {
  const f = r.figures[impl];
  if (f !== null && f !== undefined) return formatFigure(f);
  const m = r.raw[impl];
  if (m === undefined || m.status === 'n/a') return '-';
  return m.status === 'skipped' ? 'SKIPPED' : 'FAILED';
}

const KIND_TITLES: Record<Kind, string> = {
  latency: 'Latency, us (median per operation; lower is better: ratio < 1 means ucxx-ts is faster)',
  bandwidth: 'Bandwidth, MB/s = 10^6 bytes/s (higher is better: ratio > 1 means ucxx-ts is faster)',
  rate: 'Message rate, operations/s (higher is better: ratio > 1 means ucxx-ts is faster)',
};

/** Rows as aligned text columns; `align` has an 'l' (left) or 'r' (right) per column. */
function alignColumns(table: readonly (readonly string[])[], align: string): string[] {
  const widths = (table[0] ?? []).map((_, i) => Math.max(...table.map((cells) => (cells[i] ?? '').length)));
  return table.map((cells) => cells.map((c, i) => (align[i] === 'l' ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ').trimEnd());
}

function groups(report: BenchReport): [string, ResultRecord[]][] {
  const byKind: Record<string, ResultRecord[]> = { latency: [], bandwidth: [], rate: [] };
  for (const r of report.results) byKind[r.kind]?.push(r);
  return Object.entries(byKind).filter(([, rows]) => rows.length > 0);
}

const HEADERS = ['test', 'size', 'ucxx-ts', 'ucx_perftest', 'net TCP', 'net Unix', 'ucxx/C', 'ucxx/TCP', 'ucxx/Unix'];

function row(r: ResultRecord): string[] {
  return [
    r.test, formatSize(r.size), ...IMPLEMENTATIONS.map((impl) => cell(r, impl)),
    ...IMPLEMENTATIONS.slice(1).map((impl) => formatRatio(r.ratios[`ucxx-ts/${impl}`])),
  ];
}

export function consoleTable(report: BenchReport): string {
  const lines: string[] = [];
  const m = report.machine;
  lines.push(`\nucxx-ts benchmark (${report.mode}), ${report.date}: ${m.cpuModel} x${m.cpuCount}, node ${m.node}, UCX ${m.ucx.ucxxTs ?? m.ucx.ucxPerftest}`);
  lines.push('Ratios are ucxx-ts / other, of the figure shown. Latency: < 1 = ucxx-ts faster. Bandwidth and rate: > 1 = ucxx-ts faster.');
  lines.push("'-' = no equivalent operation; FAILED / SKIPPED: see the list below the table.");
  for (const [kind, rows] of groups(report)) {
    lines.push('', (KIND_TITLES as Record<string, string>)[kind] ?? kind);
    const table = [HEADERS, ...rows.map(row)];
    const aligned = alignColumns(table, 'll');
    for (const [n, cells] of table.entries()) {
      // A blank line between tests.
      if (n > 1 && cells[0] !== table[n - 1]?.[0]) lines.push('');
      lines.push(aligned[n] as string);
    }
  }
  const ucxx = ucxxTable(report);
  if (ucxx.length > 0 && report.ucxx !== undefined) {
    lines.push('', UCXX_TITLE);
    const aligned = alignColumns(ucxx, 'lll');
    for (const [n, text] of aligned.entries()) {
      if (n > 1 && ucxx[n]?.[0] !== ucxx[n - 1]?.[0]) lines.push('');
      lines.push(text);
    }
    lines.push('', 'Columns:', ...ucxxColumnLines(report.ucxx).map((l) => `- ${l}`));
    lines.push(...ucxxNaLines(report.ucxx).map((l) => `- '-' ${l}`));
    lines.push('Targets (shown, not asserted):', ...ucxxTargetLines(report.ucxx).map((l) => `- ${l}`));
    lines.push(...report.ucxx.notes.map((l) => `- ${l}`));
  }
  const tails = tailRows(report);
  if (tails.length > 0) {
    lines.push('', TAILS_TITLE);
    lines.push(...alignColumns([TAIL_HEADERS, ...tails], 'l'));
  }
  const floor = floorRows(report);
  if (floor.length > 0) {
    lines.push('', FLOOR_TITLE);
    lines.push(...alignColumns(floor, 'lrl'));
  }
  const notes = notesOf(report);
  if (notes.length > 0) lines.push('', 'Definitions that differ:', ...notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

/** The ratio columns of the ucxx table: ucxx-ts (tuned or awaited) over a ucxx column. */
const UCXX_RATIOS: [string, string][] = [
  ['ucxx-ts:spin/ucxx-cpp', 'spin/C++'], ['ucxx-ts/ucxx-cpp', 'ts/C++'], ['ucxx-ts:await/ucxx-cpp', 'await/C++'],
  ['ucxx-ts:spin/ucxx-cpp:p99', 'spin/C++ p99'], ['ucxx-ts/ucxx-cpp:p99', 'ts/C++ p99'], ['ucxx-ts:await/ucxx-cpp:p99', 'await/C++ p99'], ['ucxx-ts/py-polling', 'ts/Py poll'],
  ['ucxx-ts/py-thread', 'ts/Py thread'], ['ucxx-ts/py-core', 'ts/Py core'],
];

export const UCXX_TITLE = 'ucxx-ts beside ucxx C++ and ucxx Python: mean one-way latency, us (lower is better) and bandwidth, MB/s (higher is better)';

/** The ucxx comparison as a table (header first), or [] when the report has none. */
function ucxxTable(report: BenchReport): string[][] {
  const u = report.ucxx;
  if (u === undefined || u.rows.length === 0) return [];
  const header = ['test', 'size', 'errors', 'n', 'w', ...u.columns.map((c) => c.label), ...UCXX_RATIOS.map(([, label]) => label)];
  const rows = u.rows.map((r) => [
    r.test, formatSize(r.size), r.errorHandling.toUpperCase(), String(r.iterations), String(r.warmup),
    ...u.columns.map((c) => {
      const f = r.figures[c.key];
      if (f !== null && f !== undefined) return formatFigure(f);
      const m = r.raw[c.key];
      return m === undefined || m.status === 'n/a' ? '-' : m.status.toUpperCase();
    }),
    ...UCXX_RATIOS.map(([key]) => formatRatio(r.ratios[key])),
  ]);
  return [header, ...rows];
}

function ucxxColumnLines(u: UcxxComparison): string[] {
  return u.columns.map((c) => `${c.label}: ${c.mode}; UCX ${c.ucx ?? 'not run'}`);
}

function ucxxTargetLines(u: UcxxComparison): string[] {
  return u.targets.map((t) => {
    const met = t.value === null ? 'no figure' : (t.side === 'max' ? t.value <= t.bound : t.value >= t.bound) ? 'met' : 'missed';
    return `${t.what}: ${t.ratio} = ${t.value === null ? '-' : formatRatio(t.value)} (target ${t.side === 'max' ? '<=' : '>='} ${formatRatio(t.bound)}): ${met}`;
  });
}

/** Why some cells are '-': the n/a reasons, once each. */
function ucxxNaLines(u: UcxxComparison): string[] {
  // By reason: the columns that give it.
  const byReason = new Map<string, Set<string>>();
  for (const r of u.rows) {
    for (const c of u.columns) {
      const m = r.raw[c.key];
      if (m?.status !== 'n/a' || m.error === undefined) continue;
      if (!byReason.has(m.error)) byReason.set(m.error, new Set());
      byReason.get(m.error)?.add(c.label);
    }
  }
  return [...byReason].map(([why, labels]) => `${[...labels].join(', ')}: ${why}`);
}

const TAIL_HEADERS = [
  'test', 'p50', 'mean', 'p90', 'p99', 'p99.9', 'C p50', 'C mean', 'C p99', 'TCP mean', 'mean - C mean', 'p99 / C p99',
];

/** The 8 B latency rows' means and tails, ucxx-ts beside ucx_perftest and net over TCP. */
function tailRows(report: BenchReport): string[][] {
  const rows: string[][] = [];
  for (const r of report.results) {
    if (r.tails === undefined) continue;
    const u = r.tails['ucxx-ts'];
    const c = r.tails.ucx_perftest;
    const tcp = r.tails['net-tcp'];
    const f = (x: number | null | undefined) => (x === null || x === undefined ? '-' : formatFigure(x));
    const diff = u?.avg != null && c?.avg != null ? formatFigure(u.avg - c.avg) : '-';
    const ratio = u?.p99 != null && c?.p99 != null && c.p99 > 0 ? formatRatio(u.p99 / c.p99) : '-';
    rows.push([r.test, f(u?.p50), f(u?.avg), f(u?.p90), f(u?.p99), f(u?.p999), f(c?.p50), f(c?.avg), f(c?.p99), f(tcp?.avg), diff, ratio]);
  }
  return rows;
}

const TAILS_TITLE = 'Latency at 8 B: means and tails, us (each statistic\'s median over the rounds; ucxx-ts then ucx_perftest (C) and net over TCP)';

/** The FFI floor table, and what the 8 B rate tests cost per operation against the raw call they make. */
function floorRows(report: BenchReport): string[][] {
  const floor = report.ffiFloor ?? [];
  const rows = floor.map((f) => [f.name, formatFigure(f.ns), f.ratio === undefined ? '' : `${formatRatio(f.ratio)} of ${f.raw}`]);
  const perOp = (test: string, raw: string): void => {
    const rate = report.results.find((r) => r.test === test)?.figures['ucxx-ts'];
    const base = floor.find((f) => f.name === raw);
    if (rate == null || base === undefined) return;
    const ns = 1e9 / rate;
    rows.push([`${test} (ucxx-perf, two processes): one operation`, formatFigure(ns), `${formatRatio(ns / base.ns)} of ${raw}`]);
  };
  perOp('put_bw:flush1000', 'raw ucp_put_nbx 8 B');
  perOp('atomic_rate', 'raw ucp_atomic_op_nbx add 64');
  // A receiving process pays at least the receive of a message that has arrived.
  perOp('tag_bw:rate', 'raw ucp_tag_recv_nbx 8 B (arrived)');
  perOp('am_bw:rate', 'raw am send + handler 8 B');
  return rows;
}

const FLOOR_TITLE = 'FFI floor, ns per call (one process, bench/ffi-floor.ts: the best of five runs of 200,000 calls)';

function notesOf(report: BenchReport): string[] {
  const notes = new Map<string, string>();
  for (const r of report.results) if (r.note !== null && r.note !== undefined) notes.set(r.test, `${r.test}: ${r.note}`);
  return [...notes.values()];
}

function md(s: string): string {
  return s.replaceAll('|', '\\|');
}

/** The ucxx comparison's markdown: the table, its columns, the targets and the notes. */
export function ucxxMarkdown(u: UcxxComparison, table: string[][]): string[] {
  const out: string[] = [];
  const [header, ...rows] = table;
  if (header === undefined) return out;
  out.push(`| ${header.map(md).join(' | ')} |`, `|---|---:|---|---:|---:|${header.slice(5).map(() => '---:').join('|')}|`);
  for (const cells of rows) out.push(`| ${cells.map(md).join(' | ')} |`);
  out.push('', 'Columns (each runs its own server and client on this host):', '', ...ucxxColumnLines(u).map((l) => `- ${md(l)}`));
  const na = ucxxNaLines(u);
  if (na.length > 0) out.push('', '`-` in the table:', '', ...na.map((l) => `- ${md(l)}`));
  out.push('', 'Targets (shown, not asserted; ratios are ucxx-ts over the other, of the mean):', '', ...ucxxTargetLines(u).map((l) => `- ${md(l)}`));
  if (u.notes.length > 0) out.push('', ...u.notes.map((l) => `- ${md(l)}`));
  return out;
}

export function markdownReport(report: BenchReport): string {
  const m = report.machine;
  const gib = (m.totalMemoryBytes / 2 ** 30).toFixed(1);
  const commit = m.git?.commit ? `${m.git.commit.slice(0, 12)}${m.git.dirty ? ' (with uncommitted changes)' : ''}` : 'unknown';
  const cfg = report.config.ucxxPerf;
  const out: string[] = [];
  out.push(report.config.hosts === undefined ? '# Benchmarks' : '# Benchmarks between two hosts', '');
  if (report.config.hosts !== undefined) out.push(`${md(report.config.hosts)}.`, '');
  out.push(`Generated by \`npm run bench\` (\`bench/run.ts\`, ${report.mode} mode) on **${report.date}**, in ${report.durationS} s.`);
  out.push('How to run it, and what each test measures: [performance.md](performance.md). Raw figures: `bench/results/latest.json`.', '');
  out.push('| machine | |', '|---|---|');
  out.push(`| CPU | ${md(String(m.cpuModel))} x ${m.cpuCount} |`);
  out.push(`| memory | ${gib} GiB |`);
  out.push(`| OS | ${md(`${m.distro ?? ''} (${m.os}, ${m.arch})`)} |`);
  out.push(`| Node.js | ${m.node} |`);
  out.push(`| UCX | ${m.ucx.ucxxTs ?? '?'} (ucxx-ts), ${m.ucx.ucxPerftest ?? '?'} (ucx_perftest${m.ucx.package ? `, ucx-utils ${m.ucx.package}` : ''}) |`);
  out.push(`| ucxx-ts | ${m.ucxxTsVersion}, commit ${commit} |`);
  out.push(`| load average (1 min) | ${m.loadAverage.start[0]} at the start, ${m.loadAverage.end[0]} at the end |`, '');
  out.push(`Settings: ucxx-ts through \`ucxx-perf --local -m ${cfg.memory} -P ${cfg.progress}\`, \`-O ${cfg.outstanding}\` for the bandwidth and rate tests ` +
    `(ucx_perftest gets the same \`-O\`); the same iterations and warm-up for every implementation (columns \`n\` and \`w\`). ` +
    'Order: for each test and size, ucxx-ts, ucx_perftest and Node `net` (TCP, then Unix socket), one at a time; rounds rotate the order. ' +
    (report.mode === 'short' ? 'Short mode: one round per point.' :
      `The points the targets are read from (8 B latency, 1 MiB bandwidth, the rate tests) run ${report.config.rounds ?? 5} rounds` +
      (report.config.extraPairs ? `, and the 1 MiB bandwidth points ${report.config.extraPairs} more rounds of ucxx-ts and ucx_perftest alone` : '') +
      '; a figure is the implementation\'s median round' +
      (report.config.extraPairs !== undefined
        ? ', and a ratio the median of the ratios of rounds run back to back (all of them are in the JSON: `raw.<implementation>.rounds`, `ratioRounds`).'
        : ', and a ratio that of the two figures.')), '');
  out.push('Ratios are **ucxx-ts divided by the other**. For latency (lower is better) a ratio below 1 ' +
    'means ucxx-ts is faster; for bandwidth and message rate (higher is better) a ratio above 1 means ucxx-ts is faster. ' +
    '`-` means the other has no equivalent operation.', '');
  if (report.config.hosts === undefined) out.push('![bandwidth and latency against message size](benchmarks.svg)', '');
  for (const [kind, rows] of groups(report)) {
    out.push(`## ${(KIND_TITLES as Record<string, string>)[kind]}`, '');
    out.push(`| ${[...HEADERS.slice(0, 2), 'n', 'w', ...HEADERS.slice(2)].join(' | ')} |`);
    out.push(`|${['---', '---:', '---:', '---:', ...HEADERS.slice(2).map(() => '---:')].join('|')}|`);
    for (const r of rows) {
      const cells = row(r);
      out.push(`| ${[cells[0], cells[1], r.iterations, r.warmup, ...cells.slice(2)].map((c) => md(String(c))).join(' | ')} |`);
    }
    out.push('');
  }
  const ucxx = ucxxTable(report);
  if (ucxx.length > 0 && report.ucxx !== undefined) {
    out.push(`## ${UCXX_TITLE}`, '');
    out.push(...ucxxMarkdown(report.ucxx, ucxx), '');
  }
  const tails = tailRows(report);
  if (tails.length > 0) {
    out.push(`## ${TAILS_TITLE}`, '');
    out.push('ucx_perftest reports one percentile per run: its median and mean come from the run that the table above shows, its 99th percentile from a second run with `-R 99` (taken over its window of the latest 2,048 samples). `mean - C mean` and `p99 / C p99` compare ucxx-ts with it.', '');
    out.push(`| ${TAIL_HEADERS.join(' | ')} |`, `|---|${TAIL_HEADERS.slice(1).map(() => '---:').join('|')}|`);
    for (const cells of tails) out.push(`| ${cells.map(md).join(' | ')} |`);
    out.push('');
  }
  const floor = floorRows(report);
  if (floor.length > 0) {
    out.push(`## ${FLOOR_TITLE}`, '');
    out.push('What one koffi crossing costs here, what the raw libucp calls of a put and an atomic cost from JavaScript (a worker in manual mode, an endpoint to itself, 8 B into UCX-allocated memory), and ucxx-ts\'s operation beside them. The last rows divide the time per operation of the 8 B rate tests above by the raw call they make.', '');
    out.push('| call | ns | against |', '|---|---:|---|');
    for (const r of floor) out.push(`| ${r.map(md).join(' | ')} |`);
    out.push('');
  }
  const spread = report.results.filter((r) => (r.ratioRounds?.['ucxx-ts/ucx_perftest']?.length ?? 0) > 1);
  if (spread.length > 0) {
    out.push('## Round to round', '');
    out.push('The ratio ucxx-ts / ucx_perftest of each round (the two ran back to back) at the points with several rounds: how far one round can be from the median on this machine.', '');
    out.push('| test | size | rounds | lowest | lower quartile | median | upper quartile | highest |', '|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of spread) {
      // Present: `spread` holds only the records with more than one of these.
      const x = r.ratioRounds['ucxx-ts/ucx_perftest'] as number[];
      const q = (f: number) => formatRatio(x[Math.round(f * (x.length - 1))]);
      out.push(`| ${r.test} | ${formatSize(r.size)} | ${x.length} | ${q(0)} | ${q(0.25)} | ${formatRatio(r.ratios['ucxx-ts/ucx_perftest'])} | ${q(0.75)} | ${q(1)} |`);
    }
    out.push('');
  }
  out.push('## Equivalents', '');
  out.push('| ucxx-ts test | ucx_perftest | Node net |', '|---|---|---|');
  const seen = new Set<string>();
  for (const r of report.results) {
    if (seen.has(r.test)) continue;
    seen.add(r.test);
    const c = r.equivalents.ucx_perftest === null ? 'none' : `\`${r.equivalents.ucx_perftest}\` (\`-O ${r.raw.ucx_perftest?.detail?.outstanding ?? (r.kind === 'latency' ? 1 : report.config.ucxxPerf.outstanding)}\`)`;
    const n = r.equivalents.net === null ? `none: ${r.raw['net-tcp']?.error ?? 'no equivalent'}` : r.equivalents.net.startsWith('lat') ? 'ping-pong, half round trip' : 'one-way stream of messages';
    out.push(`| ${r.test} | ${md(c)} | ${md(n)} |`);
  }
  out.push('');
  const notes = notesOf(report);
  if (notes.length > 0) {
    out.push('Definitions that differ (see performance.md):', '', ...notes.map((n) => `- ${md(n)}`), '');
  }
  if (report.failures.length > 0) {
    out.push('## Missing figures', '');
    for (const f of report.failures) {
      out.push(`- **${f.implementation} ${f.test} ${formatSize(f.size)}**: ${f.status}.${f.command ? ` Command: \`${f.command}\`` : ''}`);
      if (f.error) out.push('', '  ```', ...String(f.error).split('\n').map((l) => `  ${l}`), '  ```', '');
    }
    out.push('');
  }
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

// ---- SVG --------------------------------------------------------------------------------------------

interface LineStyle {
  color: string;
  dash: string;
  marker: string;
}

const STYLE: Record<Implementation, LineStyle> = {
  'ucxx-ts': { color: '#1f5fbf', dash: '', marker: 'circle' },
  ucx_perftest: { color: '#d9480f', dash: '', marker: 'square' },
  'net-tcp': { color: '#2b8a3e', dash: '6 3', marker: 'triangle' },
  'net-unix': { color: '#7048e8', dash: '2 3', marker: 'diamond' },
};

function esc(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

function num(v: number): number {
  return Number(v.toFixed(1));
}

function marker(kind: string, x: number, y: number, color: string): string {
  const r = 3.2;
  switch (kind) {
    case 'square':
      return `<rect x="${num(x - r)}" y="${num(y - r)}" width="${2 * r}" height="${2 * r}" fill="${color}"/>`;
    case 'triangle':
      return `<path d="M${num(x)},${num(y - r - 0.6)}L${num(x + r + 0.4)},${num(y + r)}L${num(x - r - 0.4)},${num(y + r)}Z" fill="${color}"/>`;
    case 'diamond':
      return `<path d="M${num(x)},${num(y - r - 0.8)}L${num(x + r + 0.8)},${num(y)}L${num(x)},${num(y + r + 0.8)}L${num(x - r - 0.8)},${num(y)}Z" fill="${color}"/>`;
    default:
      return `<circle cx="${num(x)}" cy="${num(y)}" r="${r}" fill="${color}"/>`;
  }
}

/** 1, 10, 100, 1k, ... and 0.1, 0.01 for log axes. */
function tickLabel(v: number): string {
  if (v >= 1e6) return `${formatShort(v / 1e6)}M`;
  if (v >= 1e3) return `${formatShort(v / 1e3)}k`;
  return formatShort(v);
}

function formatShort(v: number): string {
  return Number(v.toPrecision(3)).toString();
}

function sizeLabel(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${bytes / (1024 * 1024)}M`;
  if (bytes >= 1024) return `${bytes / 1024}K`;
  return `${bytes}`;
}

interface PanelSpec {
  x: number;
  y: number;
  w: number;
  h: number;
  title: string;
  unit: string;
  rows: ResultRecord[];
  xMin: number;
  xMax: number;
  note?: string;
}

/** One panel: a log-log plot of one test's figure against message size. */
function panel(p: PanelSpec): string {
  const left = 58;
  const right = 10;
  const top = 26;
  const bottom = 40;
  const pw = p.w - left - right;
  const ph = p.h - top - bottom;
  const ox = p.x + left;
  const oy = p.y + top;
  const values = p.rows.flatMap((r) => IMPLEMENTATIONS.map((impl) => r.figures[impl])).filter((v): v is number => typeof v === 'number' && v > 0);
  const out: string[] = [];
  out.push(`<g class="panel">`);
  out.push(`<text x="${p.x + left}" y="${p.y + 16}" class="ptitle">${esc(p.title)}</text>`);
  out.push(`<rect x="${ox}" y="${oy}" width="${pw}" height="${ph}" class="frame"/>`);
  const lx = (v: number) => ox + ((Math.log2(v) - Math.log2(p.xMin)) / (Math.log2(p.xMax) - Math.log2(p.xMin))) * pw;
  // x ticks: every power of two (minor), labels at powers of 16 (and at 8 and the top size if there is room).
  for (let e = Math.ceil(Math.log2(p.xMin)); e <= Math.floor(Math.log2(p.xMax)); e++) {
    const v = 2 ** e;
    const x = num(lx(v));
    const major = e % 4 === 0;
    out.push(`<line x1="${x}" y1="${oy + ph}" x2="${x}" y2="${oy + ph + (major ? 5 : 3)}" class="tick"/>`);
    if (major) {
      out.push(`<line x1="${x}" y1="${oy}" x2="${x}" y2="${oy + ph}" class="grid"/>`);
      out.push(`<text x="${x}" y="${oy + ph + 16}" class="xl">${sizeLabel(v)}</text>`);
    }
  }
  out.push(`<text x="${ox + pw / 2}" y="${oy + ph + 32}" class="axis">message size (bytes)</text>`);
  out.push(`<text transform="translate(${p.x + 13},${oy + ph / 2}) rotate(-90)" class="axis">${esc(p.unit)}</text>`);
  if (values.length === 0) {
    out.push(`<text x="${ox + pw / 2}" y="${oy + ph / 2}" class="empty">no figures</text>`, '</g>');
    return out.join('\n');
  }
  let lo = Math.floor(Math.log10(Math.min(...values)));
  let hi = Math.ceil(Math.log10(Math.max(...values)));
  if (hi === lo) hi = lo + 1;
  if (hi - lo < 2) lo -= 1;
  const ly = (v: number) => oy + ph - ((Math.log10(v) - lo) / (hi - lo)) * ph;
  const decades = hi - lo;
  for (let e = lo; e <= hi; e++) {
    for (const k of decades <= 3 ? [1, 2, 5] : [1]) {
      const v = k * 10 ** e;
      if (Math.log10(v) > hi + 1e-9) continue;
      const y = num(ly(v));
      out.push(`<line x1="${ox - (k === 1 ? 5 : 3)}" y1="${y}" x2="${ox}" y2="${y}" class="tick"/>`);
      out.push(`<line x1="${ox}" y1="${y}" x2="${ox + pw}" y2="${y}" class="${k === 1 ? 'grid' : 'grid minor'}"/>`);
      out.push(`<text x="${ox - 7}" y="${y + 3.5}" class="yl">${tickLabel(v)}</text>`);
    }
    if (decades > 3) {
      // minor ticks only
      for (let k = 2; k <= 9; k++) {
        const v = k * 10 ** e;
        if (Math.log10(v) > hi) break;
        const y = num(ly(v));
        out.push(`<line x1="${ox - 2}" y1="${y}" x2="${ox}" y2="${y}" class="tick"/>`);
      }
    }
  }
  // One line per implementation; a missing figure breaks the line.
  out.push(`<g clip-path="none">`);
  for (const impl of IMPLEMENTATIONS) {
    const style: LineStyle | undefined = STYLE[impl];
    if (style === undefined) continue;
    let d = '';
    let pen = false;
    const marks: string[] = [];
    for (const r of p.rows) {
      const v = r.figures[impl];
      if (typeof v !== 'number' || !(v > 0)) {
        pen = false;
        continue;
      }
      const x = num(lx(r.size));
      const y = num(ly(v));
      d += `${pen ? 'L' : 'M'}${x},${y}`;
      pen = true;
      marks.push(marker(style.marker, x, y, style.color));
    }
    if (d === '') continue;
    out.push(`<path d="${d}" fill="none" stroke="${style.color}" stroke-width="1.8"${style.dash ? ` stroke-dasharray="${style.dash}"` : ''}/>`);
    out.push(...marks);
  }
  out.push('</g>');
  const notes: string[] = p.note ? [p.note] : [];
  for (const impl of IMPLEMENTATIONS) {
    const missing = p.rows.filter((r) => r.raw[impl]?.status === 'failed' || r.raw[impl]?.status === 'skipped').length;
    if (missing > 0) notes.push(`${LABELS[impl] ?? impl}: ${missing} of ${p.rows.length} sizes failed or skipped`);
  }
  for (const [i, n] of notes.entries()) out.push(`<text x="${ox + 5}" y="${oy + 13 + 12 * i}" class="note">${esc(n)}</text>`);
  out.push('</g>');
  return out.join('\n');
}

export function svgPlot(report: BenchReport): string {
  const bandwidthTests = ['put_bw', 'get_bw', 'tag_bw', 'stream_bw', 'am_bw'];
  const latencyTests = ['put_lat', 'get_lat', 'tag_lat', 'am_lat'];
  const byTest = new Map<string, ResultRecord[]>();
  for (const r of report.results) {
    if (!byTest.has(r.test)) byTest.set(r.test, []);
    byTest.get(r.test)?.push(r);
  }
  for (const rows of byTest.values()) rows.sort((a, b) => a.size - b.size);
  const sizes = report.results.filter((r) => !r.test.startsWith('atomic_')).map((r) => r.size);
  const xMin = sizes.length > 0 ? Math.min(...sizes) : 8;
  const xMax = Math.max(sizes.length > 0 ? Math.max(...sizes) : 64 * 1024 * 1024, xMin * 16);
  const panels = [
    ...bandwidthTests.map((t) => ({ test: t, title: `${t}: bandwidth (higher is better)`, unit: 'MB/s' })),
    ...latencyTests.map((t) => ({ test: t, title: `${t}: median latency (lower is better)`, unit: 'microseconds' })),
  ].filter((p) => byTest.has(p.test));
  const columns = 3;
  const pw = 390;
  const ph = 270;
  const marginX = 15;
  const headerH = 96;
  const width = columns * pw + 2 * marginX;
  const rowsCount = Math.max(1, Math.ceil(panels.length / columns));
  const footerH = 62;
  const height = headerH + rowsCount * ph + footerH;
  const m = report.machine;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`);
  out.push(`<style>
  .title { font-size: 18px; font-weight: bold; fill: #111; }
  .sub { font-size: 12px; fill: #444; }
  .ptitle { font-size: 13px; font-weight: bold; fill: #222; }
  .frame { fill: #fff; stroke: #888; stroke-width: 1; }
  .grid { stroke: #ddd; stroke-width: 1; }
  .grid.minor { stroke: #eee; }
  .tick { stroke: #666; stroke-width: 1; }
  .xl { font-size: 10px; fill: #333; text-anchor: middle; }
  .yl { font-size: 10px; fill: #333; text-anchor: end; }
  .axis { font-size: 11px; fill: #444; text-anchor: middle; }
  .legend { font-size: 12px; fill: #222; }
  .note { font-size: 10px; fill: #666; }
  .empty { font-size: 12px; fill: #999; text-anchor: middle; }
</style>`);
  out.push(`<rect width="${width}" height="${height}" fill="#fafafa"/>`);
  out.push(`<text x="${marginX}" y="26" class="title">ucxx-ts vs ucx_perftest (C) vs Node net: loopback, two processes</text>`);
  out.push(`<text x="${marginX}" y="46" class="sub">${esc(`${report.date} (${report.mode} run): ${m.cpuModel} x${m.cpuCount}, ${(m.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB, ${m.distro ?? m.os}, Node ${m.node}, UCX ${m.ucx.ucxxTs ?? m.ucx.ucxPerftest}; ucxx-ts -m ${report.config.ucxxPerf.memory} -P ${report.config.ucxxPerf.progress}. Log-log axes.`)}</text>`);
  // Legend
  let lx = marginX;
  for (const impl of IMPLEMENTATIONS) {
    const style: LineStyle | undefined = STYLE[impl];
    if (style === undefined) continue;
    out.push(`<line x1="${lx}" y1="70" x2="${lx + 34}" y2="70" stroke="${style.color}" stroke-width="2"${style.dash ? ` stroke-dasharray="${style.dash}"` : ''}/>`);
    out.push(marker(style.marker, lx + 17, 70, style.color));
    const label = LABELS[impl] ?? impl;
    out.push(`<text x="${lx + 42}" y="74" class="legend">${esc(label)}</text>`);
    lx += 42 + label.length * 7 + 30;
  }
  out.push(`<text x="${marginX}" y="${90}" class="sub">Missing points: no equivalent operation (e.g. Node net has no one-sided get), or a failed run (see benchmarks.md).</text>`);
  for (const [i, p] of panels.entries()) {
    const rows = byTest.get(p.test) ?? [];
    const hasNet = rows.some((r) => r.equivalents.net !== null);
    out.push(panel({
      x: marginX + (i % columns) * pw, y: headerH + Math.floor(i / columns) * ph, w: pw - 8, h: ph - 6,
      title: p.title, unit: p.unit, rows, xMin, xMax, ...(hasNet ? {} : { note: 'no Node net equivalent' }),
    }));
  }
  const atomics = ['atomic_lat', 'atomic_rate'].flatMap((t) => byTest.get(t) ?? []);
  const atomicText = atomics.map((r) => `${r.test} ${formatSize(r.size)}: ucxx-ts ${cell(r, 'ucxx-ts').toLowerCase()}, ucx_perftest ${cell(r, 'ucx_perftest').toLowerCase()} ${r.unit}`).join('; ');
  out.push(`<text x="${marginX}" y="${height - 42}" class="sub">${esc('Latency: median per operation (half a round trip for tag_lat, am_lat and the net ping-pong; put_lat is put + flush: see performance.md).')}</text>`);
  if (atomicText) out.push(`<text x="${marginX}" y="${height - 25}" class="sub">${esc(`Atomics (not plotted): ${atomicText}.`)}</text>`);
  out.push(`<text x="${marginX}" y="${height - 8}" class="sub">${esc('Generated by npm run bench (bench/run.ts); figures in docs/benchmarks.md and bench/results/latest.json.')}</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
