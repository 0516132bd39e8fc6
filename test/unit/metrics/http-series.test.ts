/**
 * The series dashboards expect (issue 32 item 3), as the metrics module publishes them from the
 * data path's plain counters: requests by method and exact status with bounded values (the
 * standard methods and OTHER; 100-599, none, other), request and response size histograms, each
 * upstream target's up/down state, and the config sources' reload state; then merged across
 * workers as the primary's /metrics merges them (sums, max for up, min for reload state).
 */
import t from 'tap';
import { clusterExposition, workerMetricsJson } from '../../../src/metrics/cluster';
import { HTTP_METHODS, ListenerStats, methodIndex, RequestCounts, statusSlot } from '../../../src/metrics/listener-stats';
import { Metrics } from '../../../src/metrics/metrics';
import { ReloadStatus } from '../../../src/config/reload-status';

function lines(text: string, name: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .sort();
}

t.test('methods and statuses: bounded label values', async (t) => {
  t.same(
    HTTP_METHODS.map((m, i) => methodIndex(m) === i),
    HTTP_METHODS.map(() => true),
  );
  for (const m of ['PROPFIND', 'get', 'BREW', '']) t.equal(HTTP_METHODS[methodIndex(m)], 'OTHER', `${JSON.stringify(m)} is OTHER`);
  t.same([0, 99, 100, 204, 599, 600, 999, -1].map(statusSlot), [0, 600, 100, 204, 599, 600, 600, 600]);
  const c = new RequestCounts();
  c.record(methodIndex('GET'), 200, 0.01, 100, 1000);
  c.record(methodIndex('GET'), 200, 0.01, 100, 1000);
  c.record(methodIndex('PROPFIND'), 207, 0.01, 100, 1000);
  c.record(methodIndex('POST'), 0, 0.01, 100, 0);
  c.record(methodIndex('GET'), 999, 0.01, 100, 0);
  c.record(methodIndex('GET'), 200, 0.01, 100, 1000, true);
  c.record(methodIndex('OPTIONS'), 0, 0.01, 100, 0, true);
  c.record(methodIndex('BREW'), 599, 0.01, 100, 0, true);
  t.same(
    c
      .labelled()
      .sort((a, b) => a.protocol.localeCompare(b.protocol) || a.method.localeCompare(b.method) || a.status.localeCompare(b.status)),
    [
      { method: 'GET', status: '200', code_class: '2xx', protocol: 'h1', value: 2 },
      { method: 'GET', status: 'other', code_class: 'other', protocol: 'h1', value: 1 },
      { method: 'OTHER', status: '207', code_class: '2xx', protocol: 'h1', value: 1 },
      { method: 'POST', status: 'none', code_class: 'none', protocol: 'h1', value: 1 },
      { method: 'GET', status: '200', code_class: '2xx', protocol: 'h2', value: 1 },
      { method: 'OPTIONS', status: 'none', code_class: 'none', protocol: 'h2', value: 1 },
      { method: 'OTHER', status: '599', code_class: '5xx', protocol: 'h2', value: 1 },
    ],
    'an HTTP/2 stream\'s series apart, protocol="h2", with the same bounded methods and statuses',
  );
  t.same([...c.responses].sort(), [
    ['2xx', 4],
    ['5xx', 1],
    ['none', 2],
    ['other', 1],
  ]);
  t.equal(c.duration.count, 8, 'one duration histogram for both protocols');
});

t.test('ipgate_http_requests_total by method and status; size histograms; per route on a routed listener', async (t) => {
  const m = new Metrics({ processMetrics: false });
  const plain = new ListenerStats('web');
  const routed = new ListenerStats('edge');
  m.addListener(plain, 'http');
  m.addListener(routed, 'http');
  plain.http.record(methodIndex('GET'), 200, 0.002, 80, 300);
  plain.http.record(methodIndex('POST'), 403, 0.001, 5000, 120);
  routed.httpRoute('api').record(methodIndex('DELETE'), 503, 0.5, 90, 150);
  routed.httpRoute('').record(methodIndex('GET'), 404, 0.001, 70, 100);
  const text = await m.registry.metrics();
  t.same(lines(text, 'ipgate_http_requests_total'), [
    'ipgate_http_requests_total{listener="edge",route="",method="GET",status="404",code_class="4xx",protocol="h1"} 1',
    'ipgate_http_requests_total{listener="edge",route="api",method="DELETE",status="503",code_class="5xx",protocol="h1"} 1',
    'ipgate_http_requests_total{listener="web",method="GET",status="200",code_class="2xx",protocol="h1"} 1',
    'ipgate_http_requests_total{listener="web",method="POST",status="403",code_class="4xx",protocol="h1"} 1',
  ]);
  t.ok(
    lines(text, 'ipgate_http_request_size_bytes_bucket').includes('ipgate_http_request_size_bytes_bucket{listener="web",le="64"} 0'),
    'request size: 80 B is above the 64 B bucket',
  );
  t.ok(lines(text, 'ipgate_http_request_size_bytes_bucket').includes('ipgate_http_request_size_bytes_bucket{listener="web",le="256"} 1'));
  t.same(lines(text, 'ipgate_http_request_size_bytes_sum'), [
    'ipgate_http_request_size_bytes_sum{listener="edge",route=""} 70',
    'ipgate_http_request_size_bytes_sum{listener="edge",route="api"} 90',
    'ipgate_http_request_size_bytes_sum{listener="web"} 5080',
  ]);
  t.same(lines(text, 'ipgate_http_response_size_bytes_count'), [
    'ipgate_http_response_size_bytes_count{listener="edge",route=""} 1',
    'ipgate_http_response_size_bytes_count{listener="edge",route="api"} 1',
    'ipgate_http_response_size_bytes_count{listener="web"} 2',
  ]);
  t.notMatch(text, /ipgate_http_request_size_bytes_count\{listener="edge"\}/, 'a routed listener publishes per route only');
});

t.test('ipgate_upstream_up: the last attempt of each target; no series before one', async (t) => {
  const m = new Metrics({ processMetrics: false });
  const s = new ListenerStats('web');
  m.addListener(s, 'http');
  s.upstreamAnswered('10.0.0.1:80', 200, 0.01);
  s.upstreamFailed('10.0.0.2:80', 'upstream_refused');
  s.upstreamAnswered('10.0.0.3:80', 502, 0.01);
  s.upstreamFailed('10.0.0.3:80', 'upstream_reset'); // a reset mid-exchange: not "down"
  s.upstreamFailed('10.0.0.4:80', 'upstream_timeout');
  s.upstreamConnected('10.0.0.4:80'); // it answered the next one
  s.upstream('10.0.0.5:80'); // created, never tried
  t.same(lines(await m.registry.metrics(), 'ipgate_upstream_up'), [
    'ipgate_upstream_up{listener="web",upstream="10.0.0.1:80"} 1',
    'ipgate_upstream_up{listener="web",upstream="10.0.0.2:80"} 0',
    'ipgate_upstream_up{listener="web",upstream="10.0.0.3:80"} 1',
    'ipgate_upstream_up{listener="web",upstream="10.0.0.4:80"} 1',
  ]);
});

t.test("workers: requests and sizes summed, upstream up if any worker's last attempt was, reload state 0 if any refused", async (t) => {
  const primary = new Metrics({ processMetrics: false });
  const reloads = new ReloadStatus();
  reloads.record('file', '/etc/ipgate/config.yaml', true, 1_700_000_000_000);
  reloads.record('configmap', 'edge/lists', true, 1_700_000_000_000);
  reloads.record('configmap', 'edge/lists', false, 1_700_000_100_000);
  primary.setReloads(reloads);
  primary.setWatches(() => [{ configMap: 'edge/lists', use: 'lists', healthy: false, lastSuccessAt: 1_700_000_050_000 }]);
  const workers = await Promise.all(
    [1, 2].map(async (id) => {
      const w = new Metrics({ processMetrics: false });
      const s = new ListenerStats('web');
      w.addListener(s, 'http');
      for (let i = 0; i < id; i++) s.http.record(methodIndex('GET'), 200, 0.002, 100, 1000);
      if (id === 1) s.upstreamFailed('10.0.0.9:80', 'upstream_refused');
      else s.upstreamAnswered('10.0.0.9:80', 200, 0.01);
      w.addTls(
        {
          listener: 'web',
          handshakes: new Map(),
          duration: { bounds: new Float64Array(), cumulative: () => [0], sum: 0, count: 0 },
          resumed: 0,
        } as never,
        {
          listener: 'web',
          reloads: { ok: 0, refused: 0 },
          expiries: () => [],
          reloadStates: () => [{ label: 'site', ok: id === 1, lastSuccessAt: 1_700_000_000_000 + id * 1000 }],
        },
      );
      return workerMetricsJson(w, id);
    }),
  );
  const text = await clusterExposition(primary, workers);
  t.same(lines(text, 'ipgate_http_requests_total'), [
    'ipgate_http_requests_total{listener="web",method="GET",status="200",code_class="2xx",protocol="h1"} 3',
  ]);
  t.same(lines(text, 'ipgate_http_response_size_bytes_sum'), ['ipgate_http_response_size_bytes_sum{listener="web"} 3000']);
  t.same(lines(text, 'ipgate_upstream_up'), ['ipgate_upstream_up{listener="web",upstream="10.0.0.9:80"} 1']);
  t.same(lines(text, 'ipgate_config_last_reload_successful'), [
    'ipgate_config_last_reload_successful{kind="certificate",source="web/site"} 0',
    'ipgate_config_last_reload_successful{kind="configmap",source="edge/lists"} 0',
    'ipgate_config_last_reload_successful{kind="file",source="/etc/ipgate/config.yaml"} 1',
  ]);
  t.same(
    lines(text, 'ipgate_config_last_reload_successful_timestamp_seconds'),
    [
      'ipgate_config_last_reload_successful_timestamp_seconds{kind="certificate",source="web/site"} 1700000001',
      'ipgate_config_last_reload_successful_timestamp_seconds{kind="configmap",source="edge/lists"} 1700000000',
      'ipgate_config_last_reload_successful_timestamp_seconds{kind="file",source="/etc/ipgate/config.yaml"} 1700000000',
    ],
    'a refusal keeps the last success time; across workers the oldest',
  );
  t.same(lines(text, 'ipgate_configmap_watch_healthy'), ['ipgate_configmap_watch_healthy{configmap="edge/lists",use="lists"} 0']);
  t.same(lines(text, 'ipgate_configmap_watch_last_success_timestamp_seconds'), [
    'ipgate_configmap_watch_last_success_timestamp_seconds{configmap="edge/lists",use="lists"} 1700000050',
  ]);
});
