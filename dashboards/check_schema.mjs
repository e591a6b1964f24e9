// Checks Grafana dashboards against the dashboard model that Grafana publishes
// in @grafana/schema (run through check_schema.sh, which installs the pinned
// package and TypeScript). Two halves:
//
//  1. Types: each dashboard's JSON becomes the object literal of a generated
//     .ts file, `satisfies` a type built from the package's own `Dashboard`,
//     `Panel`, `RowPanel`, `VariableModel`, `GridPos`, `FieldConfigSource`,
//     `DataQuery` and each panel plugin's published `Options`/`FieldConfig`
//     (timeseries, stat, bargauge, table), and `tsc --noEmit --strict` judges
//     it. An object literal gets TypeScript's excess-property check, so a
//     misspelt or unknown field fails as well as a missing or mistyped one.
//     The package's string enums (color modes, threshold modes) are TS enums,
//     which JSON strings never match: Json<T> turns them into the union of
//     their values. Our refinement on top (every panel has an id, a title and
//     a gridPos; every query is a Prometheus query on the ${datasource}
//     variable) only narrows the package's types.
//  2. What types cannot say: schemaVersion 39, unique uids and panel ids,
//     gridPos inside the 24 columns and without overlaps, unique refIds, the
//     datasource/run/node variables, and every $variable an expression uses
//     is defined or one of Grafana's own.
//
// Usage: node check_schema.mjs --tools DIR FILE.json...   (DIR holds node_modules)
// Prints "FILE:LINE: message" per problem; exit 0 all good, 1 any problem, 2 usage.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SCHEMA_VERSION = 39;
const BUILTIN_VARS = new Set(['__rate_interval', '__range', '__interval', '__interval_ms',
  '__range_s', '__range_ms']);
const PANEL_TYPES = {
  timeseries: ['TimeSeries', 'timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen', true],
  stat: ['Stat', 'stat/panelcfg/x/StatPanelCfg_types.gen', false],
  bargauge: ['BarGauge', 'bargauge/panelcfg/x/BarGaugePanelCfg_types.gen', false],
  table: ['Table', 'table/panelcfg/x/TablePanelCfg_types.gen', true],
};

function usage(msg) {
  console.error(`check_schema: ${msg}\nusage: node check_schema.mjs --tools DIR FILE.json...`);
  process.exit(2);
}

const args = process.argv.slice(2);
const toolsAt = args.indexOf('--tools');
if (toolsAt < 0 || !args[toolsAt + 1]) usage('--tools DIR is required');
const tools = path.resolve(args[toolsAt + 1]);
const files = args.filter((_, i) => i !== toolsAt && i !== toolsAt + 1);
if (files.length === 0) usage('no dashboard given');

const problems = [];
const report = (file, line, msg) => problems.push(`${file}:${line}: ${msg}`);

// The line of the first occurrence of `needle` in the text, for messages.
function lineOf(text, needle, from = 0) {
  const at = text.indexOf(needle, from);
  return at < 0 ? 1 : text.slice(0, at).split('\n').length;
}

function lineOfPanel(text, id) {
  const m = new RegExp(`"id": ${id}[,\\n]`).exec(text);
  return m ? text.slice(0, m.index).split('\n').length : 1;
}

// --- 2. the checks types cannot express ---------------------------------

function checkLayout(file, text, d) {
  const ids = new Map();
  const boxes = [];
  const visit = (p, where) => {
    // Ids are unique (checked here); titles need not be.
    const line = Number.isInteger(p.id) ? lineOfPanel(text, p.id)
      : lineOf(text, `"title": ${JSON.stringify(p.title ?? '')}`);
    if (typeof p.id === 'number') {
      if (ids.has(p.id)) report(file, line, `${where}: panel id ${p.id} also used by "${ids.get(p.id)}"`);
      ids.set(p.id, p.title);
    }
    const g = p.gridPos;
    if (!g) report(file, line, `${where}: no gridPos`);
    else if (![g.x, g.y, g.w, g.h].every(Number.isInteger))
      report(file, line, `${where}: gridPos ${JSON.stringify(g)} needs integers x, y, w, h`);
    else {
      if (g.w < 1 || g.h < 1 || g.x < 0 || g.y < 0 || g.x + g.w > 24)
        report(file, line, `${where}: gridPos ${JSON.stringify(g)} is outside the 24-column grid`);
      for (const b of boxes)
        if (g.x < b.g.x + b.g.w && b.g.x < g.x + g.w && g.y < b.g.y + b.g.h && b.g.y < g.y + g.h)
          report(file, line, `${where}: gridPos overlaps panel "${b.title}"`);
      boxes.push({ g, title: p.title });
    }
    if (p.type !== 'row') {
      const refs = new Set();
      for (const t of p.targets ?? []) {
        if (refs.has(t.refId)) report(file, line, `${where}: refId ${t.refId} used twice`);
        refs.add(t.refId);
      }
      if (!p.targets || p.targets.length === 0) report(file, line, `${where}: no targets`);
    }
  };
  (d.panels ?? []).forEach((p, i) => {
    visit(p, `panels[${i}] "${p.title}"`);
    (p.panels ?? []).forEach((q, j) => visit(q, `panels[${i}].panels[${j}] "${q.title}"`));
  });
}

function checkVariables(file, text, d) {
  const list = d.templating?.list ?? [];
  const byName = new Map(list.map((v) => [v.name, v]));
  const ds = byName.get('datasource');
  if (!ds || ds.type !== 'datasource' || ds.query !== 'prometheus')
    report(file, lineOf(text, '"templating"'), 'no datasource variable of type "datasource" for "prometheus"');
  for (const name of ['run', 'node']) {
    const v = byName.get(name);
    const q = typeof v?.query === 'string' ? v.query : v?.query?.query;
    if (!v || v.type !== 'query' || !/^label_values\(.+,\s*\w+\)$/.test(q ?? ''))
      report(file, lineOf(text, '"templating"'), `no query variable "${name}" with a label_values(...) query`);
  }
  const exprs = [];
  for (const p of d.panels ?? [])
    for (const q of [p, ...(p.panels ?? [])])
      for (const t of q.targets ?? []) exprs.push(t.expr ?? '');
  for (const v of list) exprs.push(typeof v.query === 'string' ? v.query : v.query?.query ?? '');
  const unknown = new Set();
  for (const e of exprs)
    for (const m of e.matchAll(/\$\{?(\w+)/g))
      if (!byName.has(m[1]) && !BUILTIN_VARS.has(m[1]) && !unknown.has(m[1])) {
        unknown.add(m[1]);
        report(file, lineOf(text, m[0]), `$${m[1]} is neither a variable of the dashboard nor Grafana's`);
      }
}

// --- 1. the package's types -----------------------------------------------

const typesHeader = () => {
  const imports = Object.values(PANEL_TYPES).map(([ns, mod]) =>
    `import type * as ${ns} from '@grafana/schema/dist/esm/raw/composable/${mod}';`);
  const panels = Object.entries(PANEL_TYPES).map(([type, [ns, , custom]]) =>
    `PanelOf<'${type}', ${ns}.Options, ${custom ? `${ns}.FieldConfig` : '{}'}>`);
  return `// Generated by dashboards/check_schema.mjs: the package's dashboard model, narrowed.
import type * as g from '@grafana/schema';
${imports.join('\n')}

// JSON has no enums: a string enum becomes the union of its values.
type Json<T> = T extends string ? \`\${T}\` : T extends number | boolean | null | undefined ? T
  : T extends Array<infer U> ? Array<Json<U>> : T extends object ? { [K in keyof T]: Json<T[K]> } : T;

type Ds = { type: 'prometheus'; uid: '\${datasource}' };
// Grafana's Prometheus query (the datasource plugin's dataquery, on the package's DataQuery).
type Target = Omit<g.DataQuery, 'datasource'> & {
  datasource: Ds; expr: string; legendFormat?: string; instant?: boolean; range?: boolean;
  format?: 'time_series' | 'table' | 'heatmap'; editorMode?: 'code' | 'builder';
  interval?: string; exemplar?: boolean; intervalFactor?: number;
};
type Fixed = 'type' | 'id' | 'title' | 'gridPos' | 'datasource' | 'targets' | 'options' | 'fieldConfig';
type PanelOf<T extends string, O, F> = Omit<g.Panel<O, F>, Fixed> & {
  type: T; id: number; title: string; gridPos: g.GridPos; datasource: Ds; targets: Target[];
  options: O; fieldConfig: g.FieldConfigSource<F>;
};
type TrellisPanel = ${panels.join('\n  | ')};
type TrellisRow = Omit<g.RowPanel, 'panels' | 'gridPos'> & { gridPos: g.GridPos; panels: TrellisPanel[] };
type TrellisVariable = Omit<g.VariableModel, 'datasource'> & { datasource?: Ds };
type TrellisDashboard = Omit<g.Dashboard, 'panels' | 'templating' | 'uid' | 'title'> & {
  uid: string; title: string; panels: Array<TrellisPanel | TrellisRow>;
  templating: { list: TrellisVariable[] };
};
export type Checked = Json<TrellisDashboard>;
`;
};

function checkTypes(dashboards) {
  const tsc = path.join(tools, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!fs.existsSync(tsc) || !fs.existsSync(path.join(tools, 'node_modules', '@grafana', 'schema')))
    usage(`${tools} lacks node_modules/typescript or node_modules/@grafana/schema`);
  // Inside the tools folder, so the imports resolve to its node_modules.
  const work = fs.mkdtempSync(path.join(tools, 'check-'));
  try {
    fs.writeFileSync(path.join(work, 'trellis.ts'), typesHeader());
    const HEADER = "import type { Checked } from './trellis';\nexport const dashboard = ";
    const offset = HEADER.split('\n').length - 1;
    const sources = new Map();
    dashboards.forEach(({ file, text }, i) => {
      const name = `d${i}.ts`;
      // The JSON text as is: line N of the file is line N + offset here.
      fs.writeFileSync(path.join(work, name), `${HEADER}${text.trimEnd()} satisfies Checked;\n`);
      sources.set(name, file);
    });
    let out = '';
    try {
      execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--pretty', 'false',
        '--skipLibCheck', '--target', 'es2022', '--module', 'esnext', '--moduleResolution', 'node10',
        ...[...sources.keys()].map((n) => path.join(work, n))], { encoding: 'utf8' });
    } catch (e) {
      out = `${e.stdout ?? ''}${e.stderr ?? ''}`;
      if (!out) throw e;
    }
    // "DIR/d0.ts(12,5): error TS2353: ..." and its indented continuation lines.
    let last = null;
    for (const line of out.split('\n')) {
      const m = line.match(/([^/\\]+\.ts)\((\d+),\d+\): error (TS\d+: .*)$/);
      if (m) {
        const file = sources.get(m[1]);
        if (!file) { report(m[1], m[2], m[3]); last = problems.length - 1; continue; }
        report(file, Number(m[2]) - offset, m[3]);
        last = problems.length - 1;
      } else if (line.trim() && last !== null) {
        problems[last] += `\n    ${line.trim()}`;
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

// --- main -----------------------------------------------------------------

const dashboards = [];
const uids = new Map();
for (const file of files) {
  const text = fs.readFileSync(file, 'utf8');
  let d;
  try {
    d = JSON.parse(text);
  } catch (e) {
    report(file, 1, `not JSON: ${e.message}`);
    continue;
  }
  if (d.schemaVersion !== SCHEMA_VERSION)
    report(file, lineOf(text, '"schemaVersion"'), `schemaVersion must be ${SCHEMA_VERSION} (Grafana 10.4 and 11)`);
  if (uids.has(d.uid)) report(file, lineOf(text, '"uid"'), `uid "${d.uid}" also used by ${uids.get(d.uid)}`);
  uids.set(d.uid, file);
  for (const p of [...(d.panels ?? []), ...(d.panels ?? []).flatMap((r) => r.panels ?? [])])
    if (p.type !== 'row' && !(p.type in PANEL_TYPES))
      report(file, lineOf(text, `"type": ${JSON.stringify(p.type)}`),
        `panel "${p.title}": type "${p.type}" is not one this check knows (${Object.keys(PANEL_TYPES).join(', ')})`);
  checkLayout(file, text, d);
  checkVariables(file, text, d);
  dashboards.push({ file, text });
}
if (dashboards.length) checkTypes(dashboards);

for (const p of problems) console.log(p);
if (problems.length) {
  console.log(`check_schema: ${problems.length} problem(s) in ${files.length} dashboard(s)`);
  process.exit(1);
}
console.log(`check_schema: ${files.length} dashboard(s) match @grafana/schema's dashboard model`);
