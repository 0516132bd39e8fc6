/**
 * The optional PrometheusRule: every ipgate metric and label its alerts use is one the metrics
 * module publishes (the TLS expiry metric excepted: it comes with TLS termination), the rules pass
 * `promtool check rules`, and `promtool test rules` shows each alert firing on the series it is
 * about and staying quiet otherwise.
 *
 * Needs promtool (Debian package `prometheus`): locally a missing one skips the promtool tests with
 * the reason; in CI (CI set) they fail, as .ci/run installs it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { ListenerStats } from '../../src/metrics/listener-stats';
import { clusterExposition, workerMetricsJson } from '../../src/metrics/cluster';
import { Metrics } from '../../src/metrics/metrics';
import { LiveLists } from '../../src/store/live-lists';
import { ReloadStatus } from '../../src/config/reload-status';
import { methodIndex } from '../../src/metrics/listener-stats';
import { VARIANTS, render, renderError } from '../helpers/helm';

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

const rules = (values: Record<string, unknown> = VARIANTS['prometheusRule on']!): Rule[] =>
  render(values)
    .one('PrometheusRule')
    .spec.groups.flatMap((g: { rules: Rule[] }) => g.rules);

// Published once TLS termination exists; the rule is written ahead and matches nothing until then.
const FUTURE = new Set(['ipgate_tls_certificate_expiry_timestamp_seconds']);
// Not ipgate's: kube-state-metrics publishes container restarts for every pod.
const KUBE_STATE_METRICS = new Set(['kube_pod_container_status_restarts_total']);

function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const c = path.join(dir, name);
    if (fs.existsSync(c)) return c;
  }
  return null;
}
const PROMTOOL = onPath('promtool');
const skipPromtool = !PROMTOOL && !process.env.CI ? 'promtool missing (apt-get install -y prometheus)' : false;

function promtool(args: string[], files: Record<string, unknown>): { status: number | null; output: string } {
  if (!PROMTOOL) throw new Error('promtool not found: CI must apt-get install -y prometheus');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-promtool-'));
  try {
    for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), YAML.stringify(content));
    const r = spawnSync(PROMTOOL, args, { cwd: dir, encoding: 'utf8' });
    return { status: r.status, output: r.stdout + r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The series (name -> label names) a pod publishes, as the chart runs it: a primary (store, lists,
 * admin API) and a worker (the listeners), merged as the primary's /metrics merges them.
 */
async function published(): Promise<Map<string, Set<string>>> {
  const primary = new Metrics({ version: 'test' });
  primary.setAllowlists(new LiveLists(), { kind: 'kubernetes', lastRefusal: () => null });
  primary.adminRequest('/v1/allowlists/:name/entries', 'POST', 503);
  const reloads = new ReloadStatus();
  reloads.record('file', '/etc/ipgate/config.yaml', true);
  primary.setReloads(reloads);
  primary.setWatches(() => [{ configMap: 'ipgate-system/edge-ipgate-lists', use: 'lists', healthy: true, lastSuccessAt: Date.now() }]);
  const worker = new Metrics({ version: 'test' });
  const stats = new ListenerStats('web');
  stats.denied.set('not_allowlisted', 1);
  stats.http.record(methodIndex('GET'), 502, 0.01, 100, 200);
  stats.upstreamFailed('10.0.0.1:80', 'upstream_refused');
  worker.addListener(stats, 'http');
  worker.setSelfChecks({ state: () => ({ listeners: { web: { sourceNat: { suspected: false, public: true } } } }) });
  const out = new Map<string, Set<string>>();
  for (const line of (await clusterExposition(primary, [await workerMetricsJson(worker, 1)])).split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? /.exec(line);
    if (!m) continue;
    const labels = out.get(m[1]!) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/([a-z_]+)="/g)) labels.add(l[1]!);
    out.set(m[1]!, labels);
  }
  return out;
}

t.test('off by default; on, one PrometheusRule with the release label Prometheus selects', async (t) => {
  t.equal(render({}).all('PrometheusRule').length, 0);
  const out = render(VARIANTS['prometheusRule on']!);
  t.equal(out.one('PrometheusRule').metadata.labels!.release, 'kube-prometheus-stack');
  t.same(
    rules().map((r) => r.alert),
    [
      'IpgateDenialsSpike',
      'IpgateSourceNatSuspected',
      'IpgateStoreWritesFailing',
      'IpgateStoreContentRefused',
      'IpgateRestarting',
      'IpgateWorkersReplaced',
      'IpgateCertificateExpiringSoon',
      'IpgateConfigReloadFailed',
      'IpgateConfigMapWatchFailing',
      'IpgateHttp5xxRatio',
      'IpgateUpstreamErrors',
      'IpgateUpstreamDown',
    ],
  );
  for (const r of rules()) {
    t.ok(r.labels.severity, `${r.alert} has a severity`);
    t.ok(r.annotations.summary && r.annotations.description, `${r.alert} has a summary and a description`);
  }
});

t.test('every ipgate metric an alert uses is published, with the labels the alert groups and filters by', async (t) => {
  const series = await published();
  for (const r of rules()) {
    const names = [...r.expr.matchAll(/\b((?:ipgate|process|kube)_[a-z_]+)\{/g)].map((m) => m[1]!);
    t.ok(names.length > 0, `${r.alert} names a metric`);
    for (const n of names) {
      if (FUTURE.has(n) || KUBE_STATE_METRICS.has(n)) continue;
      t.ok(series.has(n), `${r.alert}: ${n} is published`);
    }
    for (const by of r.expr.matchAll(/by \(([^)]*)\) \((?:rate\()?([a-z_]+)/g)) {
      const labels = series.get(by[2]!);
      if (!labels) continue;
      // namespace and pod are target labels (the ServiceMonitor adds them), not ipgate's.
      for (const l of by[1]!
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== 'namespace' && x !== 'pod')) {
        t.ok(labels.has(l), `${r.alert}: ${by[2]} has a "${l}" label`);
      }
    }
  }
  t.same(
    [...series.get('ipgate_admin_requests_total')!].sort(),
    ['code_class', 'method', 'route'],
    'the store-writes alert filters on method and code_class',
  );
  t.ok(series.get('process_start_time_seconds')?.has('worker'), 'the worker-replacement alert filters on the per-process worker label');
});

t.test("every expression selects this release: namespace and the admin Service's job, or the operator's selector", async (t) => {
  for (const r of rules().filter((r) => r.alert !== 'IpgateRestarting')) {
    for (const m of r.expr.matchAll(/(?:ipgate|process)_[a-z_]+\{([^}]*)\}/g))
      t.match(m[1], /^namespace="ipgate-system",job="edge-ipgate-admin"/, r.alert);
  }
  const restarts = rules().find((r) => r.alert === 'IpgateRestarting')!;
  t.match(restarts.expr, /namespace="ipgate-system",pod=~"edge-ipgate-\[a-z0-9\]\+\(-\[a-z0-9\]\+\)\?",container="ipgate"/);
  const custom = rules({ prometheusRule: { enabled: true, selector: 'cluster="eu1",service="edge"' } });
  t.match(custom.find((r) => r.alert === 'IpgateSourceNatSuspected')!.expr, /ipgate_source_nat_suspected\{cluster="eu1",service="edge"\}/);
});

t.test('alerts can be turned off one by one, get extra labels, and extra rules are appended', async (t) => {
  const r = rules({
    prometheusRule: {
      enabled: true,
      sourceNat: { enabled: false },
      additionalAlertLabels: { team: 'edge' },
      extraRules: [{ alert: 'Mine', expr: 'vector(1)' }],
    },
  });
  t.notOk(r.some((x) => x.alert === 'IpgateSourceNatSuspected'));
  t.equal(r.find((x) => x.alert === 'IpgateDenialsSpike')!.labels.team, 'edge');
  t.equal(r[r.length - 1]!.alert, 'Mine');
  t.match(renderError({ prometheusRule: { enabled: true, sourceNat: { for: '15 minutes' } } }), /at '\/prometheusRule\/sourceNat\/for'/);
  t.match(renderError({ prometheusRule: { enabled: true, denialsSpike: { factor: 1 } } }), /at '\/prometheusRule\/denialsSpike\/factor'/);
});

t.test('promtool check rules accepts the rendered rules', { skip: skipPromtool }, async (t) => {
  const groups = render(VARIANTS['prometheusRule on']!).one('PrometheusRule').spec.groups;
  const r = promtool(['check', 'rules', 'rules.yaml'], { 'rules.yaml': { groups } });
  t.equal(r.status, 0, r.output);
  t.match(r.output, /SUCCESS: 12 rules found/);
});

// promtool unit tests: each alert against series that should fire it and series that should not.
const SEL = 'namespace="ipgate-system",job="edge-ipgate-admin"';
const POD = 'pod="edge-ipgate-abcde"';
const UNIT_TESTS = [
  {
    name: 'denials jump from 0.2/s to 10/s on one listener; another stays steady at 10/s',
    interval: '1m',
    input_series: [
      // web: 12/min for 150 minutes, then 600/min; the spike is still firing 40 minutes in.
      { series: `ipgate_denied_total{${SEL},${POD},listener="web",reason="not_allowlisted"}`, values: '0+12x150 1800+600x45' },
      { series: `ipgate_denied_total{${SEL},${POD},listener="api",reason="not_allowlisted"}`, values: '0+600x195' },
    ],
    alert_rule_test: [
      { eval_time: '150m', alertname: 'IpgateDenialsSpike', exp_alerts: [] },
      { eval_time: '158m', alertname: 'IpgateDenialsSpike', exp_alerts: [], comment: 'pending: for 10m' },
      {
        eval_time: '190m',
        alertname: 'IpgateDenialsSpike',
        exp_alerts: [
          { exp_labels: { severity: 'warning', namespace: 'ipgate-system', listener: 'web' }, summary: 'ipgate listener web denies 10/s' },
        ],
      },
    ],
  },
  {
    name: 'source NAT suspected for 20 minutes on one listener',
    interval: '1m',
    input_series: [
      { series: `ipgate_source_nat_suspected{${SEL},${POD},listener="web"}`, values: '0x10 1x30' },
      { series: `ipgate_source_nat_suspected{${SEL},${POD},listener="api"}`, values: '0x40' },
    ],
    alert_rule_test: [
      { eval_time: '20m', alertname: 'IpgateSourceNatSuspected', exp_alerts: [] },
      {
        eval_time: '30m',
        alertname: 'IpgateSourceNatSuspected',
        exp_alerts: [
          {
            exp_labels: { severity: 'critical', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde', listener: 'web' },
            summary: 'ipgate edge-ipgate-abcde sees cluster addresses on listener web',
          },
        ],
      },
    ],
  },
  {
    name: 'admin writes answered 503 (store unavailable); reads failing do not count',
    interval: '1m',
    input_series: [
      {
        series: `ipgate_admin_requests_total{${SEL},${POD},route="/v1/allowlists/:name/entries",method="POST",code_class="5xx"}`,
        values: '0x5 1+1x20',
      },
      {
        series: `ipgate_admin_requests_total{${SEL},pod="edge-ipgate-other",route="/v1/allowlists",method="GET",code_class="5xx"}`,
        values: '0+1x25',
      },
    ],
    alert_rule_test: [
      { eval_time: '5m', alertname: 'IpgateStoreWritesFailing', exp_alerts: [] },
      {
        eval_time: '20m',
        alertname: 'IpgateStoreWritesFailing',
        exp_alerts: [
          {
            exp_labels: { severity: 'critical', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde' },
            summary: 'ipgate edge-ipgate-abcde fails allowlist writes',
          },
        ],
      },
    ],
  },
  {
    name: 'the store holds refused content',
    interval: '1m',
    input_series: [{ series: `ipgate_allowlist_store_refused{${SEL},${POD},store="kubernetes"}`, values: '0x5 1x15' }],
    alert_rule_test: [
      { eval_time: '5m', alertname: 'IpgateStoreContentRefused', exp_alerts: [] },
      {
        eval_time: '15m',
        alertname: 'IpgateStoreContentRefused',
        exp_alerts: [
          {
            exp_labels: { severity: 'warning', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde', store: 'kubernetes' },
            summary: "ipgate edge-ipgate-abcde refuses the allowlist store's content",
          },
        ],
      },
    ],
  },
  {
    name: "three restarts within 30 minutes; another release's pod restarting does not count",
    interval: '1m',
    input_series: [
      {
        series: 'kube_pod_container_status_restarts_total{namespace="ipgate-system",pod="edge-ipgate-abcde",container="ipgate"}',
        values: '0x10 1x5 2x5 3x5',
      },
      {
        series: 'kube_pod_container_status_restarts_total{namespace="ipgate-system",pod="other-app-abcde",container="ipgate"}',
        values: '0+1x25',
      },
    ],
    alert_rule_test: [
      { eval_time: '18m', alertname: 'IpgateRestarting', exp_alerts: [] },
      {
        eval_time: '25m',
        alertname: 'IpgateRestarting',
        exp_alerts: [
          {
            exp_labels: { severity: 'warning', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde', container: 'ipgate' },
            summary: 'ipgate edge-ipgate-abcde restarted 3 times',
          },
        ],
      },
    ],
  },
  {
    name: 'worker 1 is replaced by worker 2 in one pod; another pod keeps its worker and its primary',
    interval: '1m',
    input_series: [
      { series: `process_start_time_seconds{${SEL},${POD},worker="primary"}`, values: '100x40' },
      { series: `process_start_time_seconds{${SEL},${POD},worker="1"}`, values: '100x10' },
      { series: `process_start_time_seconds{${SEL},${POD},worker="2"}`, values: '_x11 760x29' },
      { series: `process_start_time_seconds{${SEL},pod="edge-ipgate-fghij",worker="1"}`, values: '100x40' },
    ],
    alert_rule_test: [
      { eval_time: '8m', alertname: 'IpgateWorkersReplaced', exp_alerts: [] },
      {
        eval_time: '25m',
        alertname: 'IpgateWorkersReplaced',
        exp_alerts: [
          {
            exp_labels: { severity: 'warning', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde' },
            summary: 'ipgate edge-ipgate-abcde: 1 worker process(es) replaced',
          },
        ],
      },
    ],
  },
  {
    name: 'a certificate 10 days from expiry fires, one 30 days away does not',
    interval: '1m',
    input_series: [
      {
        series: `ipgate_tls_certificate_expiry_timestamp_seconds{${SEL},${POD},listener="web",certificate="a"}`,
        values: `${10 * 86400}x5`,
      },
      {
        series: `ipgate_tls_certificate_expiry_timestamp_seconds{${SEL},${POD},listener="web",certificate="b"}`,
        values: `${30 * 86400}x5`,
      },
    ],
    alert_rule_test: [
      {
        eval_time: '2m',
        alertname: 'IpgateCertificateExpiringSoon',
        exp_alerts: [
          {
            exp_labels: {
              severity: 'warning',
              namespace: 'ipgate-system',
              job: 'edge-ipgate-admin',
              pod: 'edge-ipgate-abcde',
              listener: 'web',
              certificate: 'a',
            },
            summary: 'an ipgate TLS certificate expires in 9d 23h 58m 0s',
          },
        ],
      },
    ],
  },
  {
    name: 'a refused edit of the config file: 0 for 5 minutes; a lists ConfigMap stays good',
    interval: '1m',
    input_series: [
      {
        series: `ipgate_config_last_reload_successful{${SEL},${POD},kind="file",source="/etc/ipgate/config.yaml"}`,
        values: '1x10 0x5 1x5',
      },
      {
        series: `ipgate_config_last_reload_successful{${SEL},${POD},kind="configmap",source="ipgate-system/edge-ipgate-lists"}`,
        values: '1x20',
      },
    ],
    alert_rule_test: [
      { eval_time: '10m', alertname: 'IpgateConfigReloadFailed', exp_alerts: [] },
      { eval_time: '11m', alertname: 'IpgateConfigReloadFailed', exp_alerts: [], comment: 'pending: for 2m' },
      {
        eval_time: '14m',
        alertname: 'IpgateConfigReloadFailed',
        exp_alerts: [
          {
            exp_labels: {
              severity: 'warning',
              namespace: 'ipgate-system',
              pod: 'edge-ipgate-abcde',
              kind: 'file',
              source: '/etc/ipgate/config.yaml',
            },
            summary: 'ipgate edge-ipgate-abcde refuses the last change of file /etc/ipgate/config.yaml',
          },
        ],
      },
      { eval_time: '17m', alertname: 'IpgateConfigReloadFailed', exp_alerts: [], comment: 'a good edit clears it' },
    ],
  },
  {
    name: 'a ConfigMap watch failing; another answered too long ago (stale); a third healthy',
    interval: '1m',
    input_series: [
      {
        series: `ipgate_configmap_watch_healthy{${SEL},${POD},configmap="ipgate-system/edge-ipgate-lists",use="lists"}`,
        values: '1x5 0x30',
      },
      {
        series: `ipgate_configmap_watch_last_success_timestamp_seconds{${SEL},${POD},configmap="ipgate-system/edge-ipgate-lists",use="lists"}`,
        values: '0+60x5 300x30',
      },
      {
        series: `ipgate_configmap_watch_healthy{${SEL},${POD},configmap="ipgate-system/edge-ipgate-allowlists",use="store"}`,
        values: '1x35',
      },
      {
        series: `ipgate_configmap_watch_last_success_timestamp_seconds{${SEL},${POD},configmap="ipgate-system/edge-ipgate-allowlists",use="store"}`,
        values: '0x35',
      },
      {
        series: `ipgate_configmap_watch_healthy{${SEL},pod="edge-ipgate-fghij",configmap="ipgate-system/edge-ipgate-lists",use="lists"}`,
        values: '1x35',
      },
      {
        series: `ipgate_configmap_watch_last_success_timestamp_seconds{${SEL},pod="edge-ipgate-fghij",configmap="ipgate-system/edge-ipgate-lists",use="lists"}`,
        values: '0+60x35',
      },
    ],
    alert_rule_test: [
      {
        eval_time: '10m',
        alertname: 'IpgateConfigMapWatchFailing',
        exp_alerts: [],
        comment: 'failing for 5m, stale for none yet: pending',
      },
      {
        eval_time: '30m',
        alertname: 'IpgateConfigMapWatchFailing',
        exp_alerts: [
          {
            exp_labels: {
              severity: 'warning',
              namespace: 'ipgate-system',
              pod: 'edge-ipgate-abcde',
              configmap: 'ipgate-system/edge-ipgate-lists',
              use: 'lists',
            },
            summary: 'ipgate edge-ipgate-abcde cannot watch ConfigMap ipgate-system/edge-ipgate-lists',
          },
          {
            exp_labels: {
              severity: 'warning',
              namespace: 'ipgate-system',
              pod: 'edge-ipgate-abcde',
              configmap: 'ipgate-system/edge-ipgate-allowlists',
              use: 'store',
            },
            summary: 'ipgate edge-ipgate-abcde cannot watch ConfigMap ipgate-system/edge-ipgate-allowlists',
          },
        ],
      },
    ],
  },
  {
    name: "5xx: 10% of 10/s on web fires; 2% on api and a quiet listener's errors do not",
    interval: '1m',
    input_series: [
      { series: `ipgate_http_requests_total{${SEL},${POD},listener="web",method="GET",status="200",code_class="2xx"}`, values: '0+540x30' },
      { series: `ipgate_http_requests_total{${SEL},${POD},listener="web",method="GET",status="502",code_class="5xx"}`, values: '0+60x30' },
      {
        series: `ipgate_http_requests_total{${SEL},${POD},listener="api",method="POST",status="200",code_class="2xx"}`,
        values: '0+588x30',
      },
      { series: `ipgate_http_requests_total{${SEL},${POD},listener="api",method="POST",status="503",code_class="5xx"}`, values: '0+12x30' },
      { series: `ipgate_http_requests_total{${SEL},${POD},listener="quiet",method="GET",status="500",code_class="5xx"}`, values: '0+3x30' },
    ],
    alert_rule_test: [
      { eval_time: '8m', alertname: 'IpgateHttp5xxRatio', exp_alerts: [], comment: 'pending: for 10m' },
      {
        eval_time: '20m',
        alertname: 'IpgateHttp5xxRatio',
        exp_alerts: [
          {
            exp_labels: { severity: 'warning', namespace: 'ipgate-system', listener: 'web' },
            summary: 'ipgate listener web answers 10% of requests with 5xx',
          },
        ],
      },
    ],
  },
  {
    name: 'an upstream refusing 0.1/s fires; another failing 0.01/s does not',
    interval: '1m',
    input_series: [
      {
        series: `ipgate_upstream_failures_total{${SEL},${POD},listener="web",upstream="10.0.0.1:80",reason="upstream_refused"}`,
        values: '0+6x30',
      },
      {
        series: `ipgate_upstream_failures_total{${SEL},${POD},listener="web",upstream="10.0.0.2:80",reason="upstream_timeout"}`,
        values: '0+0.6x30',
      },
    ],
    alert_rule_test: [
      { eval_time: '8m', alertname: 'IpgateUpstreamErrors', exp_alerts: [] },
      {
        eval_time: '20m',
        alertname: 'IpgateUpstreamErrors',
        exp_alerts: [
          {
            exp_labels: {
              severity: 'warning',
              namespace: 'ipgate-system',
              listener: 'web',
              upstream: '10.0.0.1:80',
              reason: 'upstream_refused',
            },
            summary: 'ipgate listener web: upstream 10.0.0.1:80 fails 100m/s (upstream_refused)',
          },
        ],
      },
    ],
  },
  {
    name: 'a target down for 5 minutes in one pod; up in the other; another target up',
    interval: '1m',
    input_series: [
      { series: `ipgate_upstream_up{${SEL},${POD},listener="web",upstream="10.0.0.1:80"}`, values: '1x5 0x5 1x5' },
      { series: `ipgate_upstream_up{${SEL},pod="edge-ipgate-fghij",listener="web",upstream="10.0.0.1:80"}`, values: '1x15' },
      { series: `ipgate_upstream_up{${SEL},${POD},listener="web",upstream="10.0.0.2:80"}`, values: '1x15' },
    ],
    alert_rule_test: [
      { eval_time: '6m', alertname: 'IpgateUpstreamDown', exp_alerts: [], comment: 'pending: for 2m' },
      {
        eval_time: '9m',
        alertname: 'IpgateUpstreamDown',
        exp_alerts: [
          {
            exp_labels: {
              severity: 'critical',
              namespace: 'ipgate-system',
              pod: 'edge-ipgate-abcde',
              listener: 'web',
              upstream: '10.0.0.1:80',
            },
            summary: 'upstream 10.0.0.1:80 of listener web is down for ipgate edge-ipgate-abcde',
          },
        ],
      },
      { eval_time: '13m', alertname: 'IpgateUpstreamDown', exp_alerts: [], comment: 'up again' },
    ],
  },
];

t.test('promtool test rules: each alert fires on its condition and not before', { skip: skipPromtool }, async (t) => {
  const groups = render(VARIANTS['prometheusRule on']!).one('PrometheusRule').spec.groups;
  const byName = new Map(rules().map((r) => [r.alert, r]));
  const tests = UNIT_TESTS.map((u) => ({
    ...u,
    alert_rule_test: u.alert_rule_test.map(({ comment: _c, ...a }: AlertTest) => ({
      ...a,
      exp_alerts: a.exp_alerts.map((e) => expected(t, byName.get(a.alertname)!, e)),
    })),
  }));
  const r = promtool(['test', 'rules', 'tests.yaml'], {
    'rules.yaml': { groups },
    'tests.yaml': { rule_files: ['rules.yaml'], evaluation_interval: '1m', tests },
  });
  t.equal(r.status, 0, r.output);
  t.match(r.output, /SUCCESS/);
});

t.test(
  'promtool test rules fails when an alert is expected and the series do not fire it (the check can fail)',
  { skip: skipPromtool },
  async (t) => {
    const groups = render(VARIANTS['prometheusRule on']!).one('PrometheusRule').spec.groups;
    const early = {
      eval_time: '10m',
      alertname: 'IpgateSourceNatSuspected',
      exp_alerts: [
        { exp_labels: { severity: 'critical', namespace: 'ipgate-system', pod: 'edge-ipgate-abcde', listener: 'web' }, summary: 'x' },
      ],
    };
    const quiet = {
      ...UNIT_TESTS[1]!,
      alert_rule_test: [
        { ...early, exp_alerts: early.exp_alerts.map((e) => expected(t, rules().find((r) => r.alert === early.alertname)!, e)) },
      ],
    };
    const r = promtool(['test', 'rules', 'tests.yaml'], {
      'rules.yaml': { groups },
      'tests.yaml': { rule_files: ['rules.yaml'], evaluation_interval: '1m', tests: [quiet] },
    });
    t.not(r.status, 0, 'an alert expected too early is reported');
    t.match(r.output, /FAILED/);
  },
);

interface AlertTest {
  eval_time: string;
  alertname: string;
  comment?: string;
  exp_alerts: { exp_labels: Record<string, string>; summary: string }[];
}

/**
 * promtool compares the annotations too: the summary is written out here (it carries the alert's
 * value, humanized), the description is the rendered one with the fired labels filled in.
 */
function expected(t: Test, rule: Rule, e: { exp_labels: Record<string, string>; summary: string }): unknown {
  const description = rule.annotations.description!.replace(/\{\{ \$labels\.([a-z_]+) \}\}/g, (_m, l: string) => e.exp_labels[l] ?? '');
  t.notMatch(description, /\{\{/, `${rule.alert}: the description uses only labels`);
  return { exp_labels: e.exp_labels, exp_annotations: { summary: e.summary, description } };
}

t.test("NOTES warn when the alerts select the ServiceMonitor's job but there is no ServiceMonitor", async (t) => {
  t.match(
    render(VARIANTS['prometheusRule on']!).notes(),
    /WARNING: prometheusRule is on without serviceMonitor: the alerts select job="edge-ipgate-admin"/,
  );
  t.notMatch(render({ prometheusRule: { enabled: true }, serviceMonitor: { enabled: true } }).notes(), /WARNING: prometheusRule/);
  t.notMatch(render({ prometheusRule: { enabled: true, selector: 'job="ipgate"' } }).notes(), /WARNING: prometheusRule/);
});
