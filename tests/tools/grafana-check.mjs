// grafana-check.mjs: checks a Grafana dashboard (contrib/grafana/tether.json)
// for t0610. Modes, each printing TAP-friendly lines ("ok ..." / "error ..."
// / "name ...") and exiting 0 when the check passed, 1 when it failed, 2 on
// a usage error, 3 when a module it needs is not installed:
//
//   structure DASHBOARD        what Grafana's loader needs beyond the types:
//                              unique panel ids, a grid that fits 24 columns
//                              without overlaps, datasource references that
//                              name a declared variable, variables that exist
//   schema DASHBOARD MODDIR    type-checks the dashboard against the
//                              Dashboard type of @grafana/schema (generated
//                              by Grafana from its dashboard kind) and each
//                              panel's options and custom field config against
//                              that panel plugin's types, with the TypeScript
//                              compiler (both from MODDIR, a node_modules)
//   exprs DASHBOARD            every PromQL expression (panel targets and
//                              query variables) and the metric selectors in
//                              it, found by this file's own tokenizer
//   promql DASHBOARD MODDIR    every expression parses under Prometheus's own
//                              grammar (@prometheus-io/lezer-promql) and names
//                              the same metrics the tokenizer found
//   metrics DASHBOARD FILE...  every metric an expression names has samples in
//                              the scraped Prometheus text FILEs (a histogram
//                              through its _bucket, _sum and _count series),
//                              and every label matched on is one it carries
import { readFileSync, writeFileSync, mkdtempSync, symlinkSync, rmSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [mode, dashFile, ...rest] = process.argv.slice(2);
if (!mode || !dashFile) {
	console.error('usage: grafana-check.mjs structure|schema|exprs|promql|metrics DASHBOARD [ARGS...]');
	process.exit(2);
}
const dash = JSON.parse(readFileSync(dashFile, 'utf8'));
let errors = 0;
const error = (msg) => {
	errors++;
	console.log(`error ${msg}`);
};
const finish = () => process.exit(errors ? 1 : 0);

// ---- the dashboard's parts ---------------------------------------------------

// every panel, those inside rows included, with a label for messages
function allPanels(d) {
	const out = [];
	for (const p of d.panels || []) {
		out.push(p);
		if (p.type === 'row')
			for (const q of p.panels || [])
				out.push(q);
	}
	return out;
}
const where = (p) => `panel ${p.id} "${p.title ?? ''}"`;

// Grafana's own variables, and the interval ones a range vector may use
const BUILTIN_VARS = new Set(['__interval', '__interval_ms', '__rate_interval', '__rate_interval_ms', '__range',
	'__range_s', '__range_ms', '__from', '__to', '__dashboard', '__org', '__user', '__name', '__timeFilter',
	'__auto', '__all_variables', '__url_time_range']);
const INTERVAL_VARS = ['__rate_interval', '__interval', '__range', '__auto'];

// "$x", "${x}", "${x:fmt}", "[[x]]": the variable names a text refers to
function varRefs(text) {
	const out = [];
	const re = /\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]/g;
	let m;
	while ((m = re.exec(text)))
		out.push(m[1] || m[2] || m[3]);
	return out;
}

// Every PromQL expression with where it comes from. A query variable's
// label_values(SELECTOR, label) and query_result(EXPR) hold one; metrics()
// and label_names() hold none.
function expressions(d) {
	const out = [];
	for (const p of allPanels(d)) {
		if (p.type === 'row')
			continue;
		for (const t of p.targets || [])
			if (typeof t.expr === 'string')
				out.push({ where: `${where(p)} target ${t.refId}`, expr: t.expr });
	}
	for (const v of d.templating?.list || []) {
		if (v.type !== 'query')
			continue;
		const q = typeof v.query === 'string' ? v.query : v.query?.query;
		if (typeof q !== 'string')
			continue;
		let m;
		if ((m = /^\s*label_values\s*\(\s*(.*)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$/s.exec(q)))
			out.push({ where: `variable ${v.name}`, expr: m[1] });
		else if ((m = /^\s*query_result\s*\(\s*(.*)\s*\)\s*$/s.exec(q)))
			out.push({ where: `variable ${v.name}`, expr: m[1] });
		else if (!/^\s*(label_names|metrics|label_values)\s*\(/.test(q))
			out.push({ where: `variable ${v.name}`, expr: q, unknown: true });
	}
	return out;
}

// Grafana's interval variables become a duration, so the expression is
// PromQL; a variable anywhere but inside a string is an error.
function substitute(expr) {
	let e = expr;
	for (const v of INTERVAL_VARS)
		e = e.split('${' + v + '}').join('5m').split('$' + v).join('5m');
	return e;
}

// ---- a PromQL tokenizer ------------------------------------------------------

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or',
	'unless', 'offset', 'atan2', 'start', 'end', 'step', 'inf', 'nan']);
// aggregation operators may put their grouping before the parentheses:
// "sum by (x) (...)": the identifier is followed by a keyword, not "("
const AGGREGATORS = new Set(['sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values',
	'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio']);
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

function tokenize(src) {
	const toks = [];
	let i = 0;
	while (i < src.length) {
		const c = src[i];
		if (/\s/.test(c)) {
			i++;
			continue;
		}
		if (c === '#') {   // a comment runs to the end of the line
			while (i < src.length && src[i] !== '\n')
				i++;
			continue;
		}
		if (c === '"' || c === "'" || c === '`') {
			let j = i + 1, val = '';
			while (j < src.length && src[j] !== c) {
				if (src[j] === '\\' && c !== '`') {
					val += src[j + 1];
					j += 2;
				} else {
					val += src[j++];
				}
			}
			if (j >= src.length)
				throw new Error(`unterminated string at ${i}`);
			toks.push({ t: 'str', v: val, at: i });
			i = j + 1;
			continue;
		}
		let m;
		const restSrc = src.slice(i);
		if ((m = /^(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?:(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)?)/.exec(restSrc)) && m[0]) {
			toks.push({ t: 'num', v: m[0], at: i });
			i += m[0].length;
			continue;
		}
		if ((m = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(restSrc))) {
			toks.push({ t: 'id', v: m[0], at: i });
			i += m[0].length;
			continue;
		}
		if ((m = /^(?:=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],:@])/.exec(restSrc))) {
			toks.push({ t: 'op', v: m[0], at: i });
			i += m[0].length;
			continue;
		}
		throw new Error(`unexpected '${c}' at ${i}`);
	}
	return toks;
}

// The selectors of an expression: [{metric, matchers: [{label, op, value}]}].
// An identifier is a metric name unless it is a keyword, a function or
// aggregator (followed by "(" or a grouping keyword), or a label name
// (inside {} or a by/without/on/ignoring/group_x list).
function selectors(expr) {
	const toks = tokenize(expr);
	const out = [];
	const stack = [];   // what each open bracket is: 'labels', 'matchers', 'range', 'call'
	for (let k = 0; k < toks.length; k++) {
		const tk = toks[k], next = toks[k + 1];
		const inside = stack[stack.length - 1];
		if (tk.t === 'op') {
			if (tk.v === '(')
				stack.push(toks[k - 1] && LABEL_LISTS.has(toks[k - 1].v) && toks[k - 1].t === 'id' ? 'labels' : 'call');
			else if (tk.v === '{')
				stack.push('matchers');
			else if (tk.v === '[')
				stack.push('range');
			else if (tk.v === ')' || tk.v === '}' || tk.v === ']') {
				if (!stack.length)
					throw new Error(`unbalanced '${tk.v}' at ${tk.at}`);
				stack.pop();
			}
			continue;
		}
		if (tk.t !== 'id' || inside === 'labels' || inside === 'matchers' || inside === 'range')
			continue;
		if (KEYWORDS.has(tk.v.toLowerCase()))
			continue;
		if (next && next.t === 'op' && next.v === '(')
			continue;   // a function call
		if (AGGREGATORS.has(tk.v) && next && next.t === 'id' && (next.v === 'by' || next.v === 'without'))
			continue;   // sum by (x) (...)
		const sel = { metric: tk.v, matchers: [] };
		if (next && next.t === 'op' && next.v === '{') {
			// label matchers: NAME OP "VALUE" [, ...]
			let j = k + 2;
			while (j < toks.length && !(toks[j].t === 'op' && toks[j].v === '}')) {
				const name = toks[j], op = toks[j + 1], val = toks[j + 2];
				if (!name || !op || !val || (name.t !== 'id' && name.t !== 'str') || op.t !== 'op' || val.t !== 'str')
					throw new Error(`bad label matcher at ${name ? name.at : expr.length}`);
				sel.matchers.push({ label: name.v, op: op.v, value: val.v });
				j += 3;
				if (toks[j] && toks[j].t === 'op' && toks[j].v === ',')
					j++;
			}
		}
		out.push(sel);
	}
	if (stack.length)
		throw new Error('unclosed bracket');
	// {__name__="x"} names a metric too; this tokenizer does not follow it
	for (const s of out)
		if (s.matchers.some((m) => m.label === '__name__'))
			throw new Error('a __name__ matcher: name the metric instead');
	for (let k = 0; k < toks.length; k++)
		if (toks[k].t === 'op' && toks[k].v === '{' && (!toks[k - 1] || toks[k - 1].t !== 'id'))
			throw new Error(`a selector without a metric name at ${toks[k].at}`);
	return out;
}

function allSelectors() {
	const out = [];
	for (const e of expressions(dash)) {
		if (e.unknown) {
			error(`${e.where}: a variable query this check does not understand: ${e.expr}`);
			continue;
		}
		const src = substitute(e.expr);
		for (const v of varRefs(src.replace(/"(?:[^"\\]|\\.)*"/g, '""')))
			error(`${e.where}: variable $${v} outside a string: ${e.expr}`);
		try {
			out.push({ ...e, src, sels: selectors(src) });
		} catch (err) {
			error(`${e.where}: ${err.message}: ${e.expr}`);
		}
	}
	return out;
}

// ---- structure ---------------------------------------------------------------

const PROM_FIELDS = { expr: 'string', legendFormat: 'string', instant: 'boolean', range: 'boolean',
	exemplar: 'boolean', interval: 'string', intervalFactor: 'number', hide: 'boolean' };

function checkStructure() {
	const d = dash;
	if (!Number.isInteger(d.schemaVersion) || d.schemaVersion < 36)
		error(`schemaVersion ${d.schemaVersion}: datasource references are objects from 36 on`);
	if (typeof d.uid !== 'string' || !/^[A-Za-z0-9_-]{1,40}$/.test(d.uid))
		error(`uid '${d.uid}' must be 1-40 characters of [A-Za-z0-9_-]`);
	if (!d.title)
		error('no title');
	if ('id' in d && d.id !== null)
		error('id must be null or absent (it is internal to one Grafana)');

	// variables: unique names; a datasource variable for Prometheus
	const vars = new Map();
	for (const v of d.templating?.list || []) {
		if (vars.has(v.name))
			error(`variable ${v.name} declared twice`);
		vars.set(v.name, v);
	}
	const inputs = new Map((d.__inputs || []).map((i) => [i.name, i]));
	const dsVars = new Set([...vars.values()].filter((v) => v.type === 'datasource' && v.query === 'prometheus')
		.map((v) => v.name));
	for (const i of inputs.values())
		if (i.type === 'datasource' && i.pluginId === 'prometheus')
			dsVars.add(i.name);
	if (dsVars.size === 0)
		error('no Prometheus datasource variable (a "datasource" variable or an __inputs entry)');
	const checkDs = (ds, what) => {
		if (!ds || typeof ds !== 'object') {
			error(`${what}: no datasource reference`);
			return;
		}
		if (ds.type !== 'prometheus')
			error(`${what}: datasource type '${ds.type}', not prometheus`);
		const refs = varRefs(ds.uid || '');
		if (refs.length !== 1 || !dsVars.has(refs[0]))
			error(`${what}: datasource uid '${ds.uid}' names no datasource variable (${[...dsVars].join(', ')})`);
	};
	const known = (name) => vars.has(name) || BUILTIN_VARS.has(name);
	for (const v of vars.values()) {
		if (v.type === 'query') {
			checkDs(v.datasource, `variable ${v.name}`);
			for (const r of varRefs(JSON.stringify(v.query)))
				if (!known(r))
					error(`variable ${v.name}: refers to an undeclared variable $${r}`);
		}
	}

	// panels: ids, grid, datasources, targets
	const ids = new Set();
	const cells = new Map();   // "x,y" -> panel, the top-level grid
	const place = (p) => {
		const g = p.gridPos;
		if (!g || ![g.x, g.y, g.w, g.h].every(Number.isInteger)) {
			error(`${where(p)}: gridPos needs integer x, y, w, h`);
			return;
		}
		if (g.w < 1 || g.h < 1 || g.x < 0 || g.y < 0 || g.x + g.w > 24)
			error(`${where(p)}: gridPos ${JSON.stringify(g)} does not fit the 24-column grid`);
		for (let x = g.x; x < g.x + g.w; x++)
			for (let y = g.y; y < g.y + g.h; y++) {
				const o = cells.get(`${x},${y}`);
				if (o) {
					error(`${where(p)} overlaps ${where(o)} at ${x},${y}`);
					return;
				}
				cells.set(`${x},${y}`, p);
			}
	};
	for (const p of allPanels(d)) {
		if (!Number.isInteger(p.id) || p.id < 1)
			error(`${where(p)}: id must be a positive integer`);
		else if (ids.has(p.id))
			error(`${where(p)}: id used twice`);
		ids.add(p.id);
		if (!p.title && p.type !== 'row')
			error(`${where(p)}: no title`);
		for (const r of varRefs(JSON.stringify([p.title, p.description, p.repeat ? `$${p.repeat}` : ''])))
			if (!known(r))
				error(`${where(p)}: refers to an undeclared variable $${r}`);
	}
	for (const p of d.panels || []) {
		place(p);
		if (p.type === 'row' && !p.collapsed && (p.panels || []).length)
			error(`${where(p)}: an open row keeps its panels at the top level, not in "panels"`);
	}
	for (const p of allPanels(d)) {
		if (p.type === 'row')
			continue;
		if (p.type === 'text')
			continue;
		checkDs(p.datasource, where(p));
		const targets = p.targets || [];
		if (!targets.length)
			error(`${where(p)}: no targets`);
		const refIds = new Set();
		for (const t of targets) {
			if (typeof t.refId !== 'string' || !t.refId || refIds.has(t.refId))
				error(`${where(p)}: target refId '${t.refId}' missing, not a string or used twice`);
			refIds.add(t.refId);
			// the Prometheus query's fields (its types are the plugin's, not in @grafana/schema)
			for (const [k, type] of Object.entries(PROM_FIELDS))
				if (k in t && typeof t[k] !== type)
					error(`${where(p)} target ${t.refId}: ${k} must be a ${type}`);
			if ('format' in t && !['time_series', 'table', 'heatmap'].includes(t.format))
				error(`${where(p)} target ${t.refId}: format '${t.format}' is not time_series, table or heatmap`);
			if ('editorMode' in t && !['code', 'builder'].includes(t.editorMode))
				error(`${where(p)} target ${t.refId}: editorMode '${t.editorMode}' is not code or builder`);
			if (t.datasource)
				checkDs(t.datasource, `${where(p)} target ${t.refId}`);
			if (typeof t.expr !== 'string' || !t.expr.trim())
				error(`${where(p)} target ${t.refId}: no expr`);
			for (const r of varRefs(`${t.expr} ${t.legendFormat ?? ''} ${t.interval ?? ''}`))
				if (!known(r))
					error(`${where(p)} target ${t.refId}: refers to an undeclared variable $${r}`);
		}
	}
	if (!errors)
		console.log(`ok ${allPanels(d).length} panels, ${vars.size} variables, ${expressions(d).length} expressions`);
	finish();
}

// ---- schema: @grafana/schema's types, checked by the TypeScript compiler --------

// The types describe objects in code: a string enum (MappingType.ValueToText)
// is its value ("value") in JSON. Json<T> turns each string enum into the
// union of its values and keeps everything else, so a JSON literal can be
// checked against them; PartialJson<T> also makes every field optional
// (Grafana fills in a panel's option defaults).
const PRELUDE = `
type IsAny<T> = 0 extends (1 & T) ? true : false;
type Json<T> = IsAny<T> extends true ? any
	: T extends string ? \`\${T}\`
	: T extends number | boolean | null | undefined ? T
	: T extends ReadonlyArray<infer U> ? Array<Json<U>>
	: T extends object ? { [K in keyof T]: Json<T[K]> }
	: T;
type PartialJson<T> = IsAny<T> extends true ? any
	: T extends string ? \`\${T}\`
	: T extends number | boolean | null | undefined ? T
	: T extends ReadonlyArray<infer U> ? Array<PartialJson<U>>
	: T extends object ? { [K in keyof T]?: PartialJson<T[K]> }
	: T;
`;

function checkSchema(moddir) {
	const require = createRequire(join(moddir, 'noop.js'));
	let ts, schemaPkg;
	try {
		ts = require('typescript');
		schemaPkg = JSON.parse(readFileSync(join(moddir, '@grafana/schema/package.json'), 'utf8'));
	} catch (err) {
		console.log(`missing ${err.message.split('\n')[0]}`);
		process.exit(3);
	}
	console.log(`using @grafana/schema ${schemaPkg.version}, typescript ${ts.version}`);
	// each panel plugin's types: exports "./dist/esm/raw/composable/TYPE/panelcfg/x/NamePanelCfg_types.gen"
	// (the directory is the plugin id without dashes, or its old long name)
	const cfgs = new Map();
	for (const key of Object.keys(schemaPkg.exports || {})) {
		const m = /^\.\/(dist\/esm\/raw\/composable\/([a-z0-9]+)\/panelcfg\/x\/[A-Za-z0-9]+_types\.gen)$/.exec(key);
		if (m)
			cfgs.set(m[2], `@grafana/schema/${m[1]}`);
	}
	const LONG = { annolist: 'annotationslist', dashlist: 'dashboardlist' };
	const cfgOf = (type) => typeof type === 'string' ? cfgs.get(LONG[type] || type.toLowerCase().replace(/-/g, '')) : undefined;
	const dts = (spec) => {
		const p = schemaPkg.exports[`./${spec.replace('@grafana/schema/', '')}`];
		return readFileSync(join(moddir, '@grafana/schema', p.types), 'utf8');
	};

	const lines = [`import type { Dashboard } from '@grafana/schema';`];
	const used = new Map();
	for (const p of allPanels(dash)) {
		if (p.type === 'row' || used.has(p.type))
			continue;
		if (!cfgOf(p.type)) {
			error(`${where(p)}: panel type '${p.type}' is not a panel @grafana/schema ${schemaPkg.version} knows`);
			continue;
		}
		used.set(p.type, `P_${used.size + 1}`);
		lines.push(`import type * as P_${used.size} from '${cfgOf(p.type)}';`);
	}
	lines.push(PRELUDE);
	const marks = [];   // [line, what]
	const emit = (what, decl, value) => {
		marks.push([lines.join('\n').split('\n').length + 1, what]);
		lines.push(`// ${what}`);
		lines.push(`export const v${marks.length}: ${decl} = ${JSON.stringify(value, null, 1)};`);
		lines.push('');
	};
	emit('the dashboard (Dashboard)', 'Json<Dashboard>', dash);
	for (const p of allPanels(dash)) {
		const ns = used.get(p.type);
		if (!ns)
			continue;
		const src = dts(cfgOf(p.type));
		if (p.options !== undefined) {
			if (/export interface Options\b/.test(src))
				emit(`${where(p)} options (${p.type} Options)`, `PartialJson<${ns}.Options>`, p.options);
			else
				error(`${where(p)}: has options, but the ${p.type} panel has none`);
		}
		const custom = p.fieldConfig?.defaults?.custom;
		if (custom !== undefined) {
			if (/export interface FieldConfig\b/.test(src))
				emit(`${where(p)} fieldConfig.defaults.custom (${p.type} FieldConfig)`,
				     `PartialJson<${ns}.FieldConfig>`, custom);
			else
				error(`${where(p)}: has fieldConfig.defaults.custom, but the ${p.type} panel has no field config`);
		}
	}

	const dir = mkdtempSync(join(tmpdir(), 'grafana-check-'));
	try {
		symlinkSync(moddir, join(dir, 'node_modules'));
		const file = join(dir, 'dashboard.ts');
		writeFileSync(file, lines.join('\n'));
		const program = ts.createProgram([file], {
			strict: true, noEmit: true, skipLibCheck: true, types: [],
			target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
			moduleResolution: ts.ModuleResolutionKind.Bundler,
		});
		const diags = ts.getPreEmitDiagnostics(program);
		for (const dg of diags) {
			let what = 'the check itself';
			let line = 0;
			if (dg.file && dg.start !== undefined) {
				line = dg.file.getLineAndCharacterOfPosition(dg.start).line + 1;
				for (const [l, w] of marks)
					if (l <= line)
						what = w;
			}
			const text = ts.flattenDiagnosticMessageText(dg.messageText, ' / ').replace(/\s+/g, ' ');
			error(`${what}: ${text.slice(0, 600)}`);
		}
		if (process.env.GRAFANA_CHECK_KEEP)
			writeFileSync(process.env.GRAFANA_CHECK_KEEP, lines.join('\n'));
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
	if (!errors)
		console.log(`ok the dashboard and ${marks.length - 1} panel option and field config sets type-check`);
	finish();
}

// ---- exprs, promql, metrics ----------------------------------------------------

function metricSet(list) {
	return [...new Set(list.flatMap((e) => e.sels.map((s) => s.metric)))].sort();
}

function listExprs() {
	const list = allSelectors();
	for (const e of list)
		console.log(`expr ${e.where}: ${e.expr.replace(/\s+/g, ' ')} -> ${metricSet([e]).join(' ')}`);
	for (const n of metricSet(list))
		console.log(`name ${n}`);
	finish();
}

function checkPromql(moddir) {
	const require = createRequire(join(moddir, 'noop.js'));
	let parser, version;
	try {
		({ parser } = require('@prometheus-io/lezer-promql'));
		version = JSON.parse(readFileSync(join(moddir, '@prometheus-io/lezer-promql/package.json'), 'utf8')).version;
	} catch (err) {
		console.log(`missing ${err.message.split('\n')[0]}`);
		process.exit(3);
	}
	console.log(`using @prometheus-io/lezer-promql ${version}`);
	const list = allSelectors();
	let n = 0;
	for (const e of list) {
		const tree = parser.parse(e.src);
		const names = new Set();
		let bad = null;
		tree.iterate({
			enter(node) {
				if (node.type.isError && bad === null)
					bad = node.from;
				if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector')
					names.add(e.src.slice(node.from, node.to));
			},
		});
		if (bad !== null) {
			error(`${e.where}: not PromQL near '${e.src.slice(Math.max(0, bad - 10), bad + 10)}': ${e.expr}`);
			continue;
		}
		const mine = metricSet([e]).join(' '), theirs = [...names].sort().join(' ');
		if (mine !== theirs)
			error(`${e.where}: the grammar finds metrics '${theirs}', the tokenizer '${mine}': ${e.expr}`);
		n++;
	}
	if (!errors)
		console.log(`ok ${n} expressions parse; the grammar and the tokenizer agree on their metrics`);
	finish();
}

// Prometheus text: name -> set of label names seen on its samples, and
// name -> set of 'label=value' pairs
function scrape(files) {
	const labels = new Map(), pairs = new Map();
	for (const f of files) {
		for (const line of readFileSync(f, 'utf8').split('\n')) {
			if (!line || line.startsWith('#'))
				continue;
			const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+\S+/.exec(line);
			if (!m) {
				error(`${f}: not a sample line: ${line}`);
				continue;
			}
			if (!labels.has(m[1])) {
				labels.set(m[1], new Set());
				pairs.set(m[1], new Set());
			}
			const re = /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
			let l;
			while ((l = re.exec(m[3] || ''))) {
				labels.get(m[1]).add(l[1]);
				pairs.get(m[1]).add(`${l[1]}=${l[2]}`);
			}
		}
	}
	return { labels, pairs };
}

// what Prometheus adds to every sample it scrapes
const TARGET_LABELS = new Set(['instance', 'job']);

function checkMetrics(files) {
	if (!files.length) {
		console.error('metrics: name the scraped files');
		process.exit(2);
	}
	const { labels, pairs } = scrape(files);
	const list = allSelectors();
	const found = new Set(), missing = new Set();
	for (const e of list) {
		for (const s of e.sels) {
			let series = [s.metric];
			if (!labels.has(s.metric)) {
				// a histogram or summary by its base name
				series = ['_bucket', '_sum', '_count'].map((x) => s.metric + x).filter((x) => labels.has(x));
				if (!series.length) {
					missing.add(s.metric);
					error(`${e.where}: metric ${s.metric} is in no scraped file: ${e.expr}`);
					continue;
				}
			}
			found.add(s.metric);
			for (const m of s.matchers) {
				if (TARGET_LABELS.has(m.label))
					continue;
				if (!series.some((x) => labels.get(x).has(m.label))) {
					error(`${e.where}: ${s.metric} has no label '${m.label}': ${e.expr}`);
					continue;
				}
				// a literal equality must match a value that exists
				if (m.op === '=' && !varRefs(m.value).length && m.value !== '' &&
				    !series.some((x) => pairs.get(x).has(`${m.label}=${m.value}`)))
					error(`${e.where}: no ${s.metric} series has ${m.label}="${m.value}": ${e.expr}`);
			}
		}
	}
	for (const n of [...found].sort())
		console.log(`found ${n}`);
	for (const n of [...missing].sort())
		console.log(`missing ${n}`);
	finish();
}

switch (mode) {
case 'structure':
	checkStructure();
	break;
case 'schema':
	if (!rest[0] || !existsSync(rest[0])) {
		console.log(`missing the node_modules directory '${rest[0] ?? ''}'`);
		process.exit(3);
	}
	checkSchema(rest[0]);
	break;
case 'exprs':
	listExprs();
	break;
case 'promql':
	if (!rest[0] || !existsSync(rest[0])) {
		console.log(`missing the node_modules directory '${rest[0] ?? ''}'`);
		process.exit(3);
	}
	checkPromql(rest[0]);
	break;
case 'metrics':
	checkMetrics(rest);
	break;
default:
	console.error(`unknown mode '${mode}'`);
	process.exit(2);
}
