import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import { Registry } from 'prom-client';
import { resolveInstrumentation } from '../../src/observability/index.js';

const DIR = new URL('../../examples/observability/', import.meta.url);
/** Labels Prometheus adds to every series (the target's), and the bucket bound of histograms. */
const TARGET_LABELS = new Set(['instance', 'job']);

interface Registered {
  type: string;
  labels: Set<string>;
}

/** Every metric the package registers, by name, as a registry holds it after resolveInstrumentation. */
async function registered(): Promise<Map<string, Registered>> {
  const registry = new Registry();
  resolveInstrumentation('test', { registry });
  const out = new Map<string, Registered>();
  for (const metric of await registry.getMetricsAsJSON()) {
    const labelNames = (registry.getSingleMetric(metric.name) as unknown as { labelNames: string[] }).labelNames;
    out.set(metric.name, { type: String(metric.type), labels: new Set(labelNames) });
  }
  return out;
}

/**
 * Checks one PromQL expression: each metric it names is registered (histograms through their
 * `_bucket`, `_count` and `_sum` series) and each label it selects on is one of that metric's.
 * Answers the metric names it found.
 */
function checkExpression(expr: string, metrics: Map<string, Registered>, where: string): string[] {
  const names: string[] = [];
  for (const match of expr.matchAll(/\b(marketplace_[a-z_]+)(\{([^}]*)\})?/g)) {
    const series = match[1]!;
    const histogram = /^(.*)_(bucket|count|sum)$/.exec(series);
    const name = metrics.has(series) ? series : histogram !== null && metrics.get(histogram[1]!)?.type === 'histogram' ? histogram[1]! : undefined;
    assert.ok(name !== undefined, `${where}: ${series} is not a metric this package registers`);
    names.push(name);
    for (const selector of (match[3] ?? '').matchAll(/(\w+)\s*(=~|!~|!=|=)/g)) {
      const labelName = selector[1]!;
      const known = metrics.get(name)!.labels.has(labelName) || TARGET_LABELS.has(labelName) || (labelName === 'le' && series.endsWith('_bucket'));
      assert.ok(known, `${where}: ${name} has no label "${labelName}"`);
    }
  }
  return names;
}

describe('examples/observability', () => {
  it('the Grafana dashboard parses and charts only metrics and labels the package registers, all of them', async () => {
    const metrics = await registered();
    const dashboard = JSON.parse(readFileSync(new URL('grafana-dashboard.json', DIR), 'utf8')) as { title: string; panels: { title: string; type: string; targets?: { expr: string }[] }[] };
    assert.equal(dashboard.title, 'embedded-marketplace');
    const charted = new Set<string>();
    let targets = 0;
    for (const panel of dashboard.panels) {
      if (panel.type === 'row') continue;
      assert.ok((panel.targets ?? []).length > 0, `panel ${panel.title} has a query`);
      for (const target of panel.targets ?? []) {
        targets += 1;
        const names = checkExpression(target.expr, metrics, `panel "${panel.title}"`);
        assert.ok(names.length > 0, `panel "${panel.title}" queries a marketplace metric`);
        for (const name of names) charted.add(name);
      }
    }
    assert.ok(targets >= 10);
    assert.deepEqual([...charted].sort(), [...metrics.keys()].sort(), 'every metric has a panel');
  });

  it('the alert rules parse and name only metrics and labels the package registers', async () => {
    const metrics = await registered();
    const rules = yaml.load(readFileSync(new URL('alerts.yml', DIR), 'utf8')) as { groups: { name: string; rules: { alert: string; expr: string; for?: string; labels: { severity: string }; annotations: { summary: string } }[] }[] };
    const alerted = new Set<string>();
    const names = new Set<string>();
    for (const group of rules.groups) {
      for (const rule of group.rules) {
        assert.match(rule.alert, /^Marketplace[A-Za-z]+$/);
        assert.ok(!names.has(rule.alert), `${rule.alert} is defined once`);
        names.add(rule.alert);
        assert.ok(['warning', 'critical'].includes(rule.labels.severity), `${rule.alert} has a severity`);
        assert.ok(rule.annotations.summary.length > 10, `${rule.alert} has a summary`);
        if (rule.for !== undefined) assert.match(rule.for, /^\d+[smh]$/);
        for (const name of checkExpression(rule.expr, metrics, `alert ${rule.alert}`)) alerted.add(name);
      }
    }
    // What docs/observability.md says to alert on.
    for (const name of ['marketplace_signature_failures_total', 'marketplace_outbox_oldest_pending_seconds', 'marketplace_operations_pending', 'marketplace_outbox_deliveries_total']) {
      assert.ok(alerted.has(name), `an alert watches ${name}`);
    }
  });

  it('the checks above catch an unknown metric or label', async () => {
    const metrics = await registered();
    assert.throws(() => checkExpression('rate(marketplace_request_total[5m])', metrics, 'x'), /marketplace_request_total is not a metric/);
    assert.throws(() => checkExpression('marketplace_requests_total{path="/v1"}', metrics, 'x'), /has no label "path"/);
    assert.throws(() => checkExpression('marketplace_outbox_pending_count', metrics, 'x'), /not a metric/);
    assert.deepEqual(checkExpression('sum(rate(marketplace_handler_duration_seconds_bucket{le="1", outcome="done"}[5m]))', metrics, 'x'), ['marketplace_handler_duration_seconds']);
  });
});
