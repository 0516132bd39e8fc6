/**
 * `ipgate import ingress-nginx --tls` off the cluster (issue 27, degraded): the compiled command
 * writes the config where the Secrets are not (exit 0; it used to stop with "an importer bug"),
 * `check-config` then names the files it cannot read, and once the Secrets' files are laid out
 * under `--tls-dir` (made by openssl, as the chart mounts them) the same config is valid and
 * serves: ipgate terminates TLS with the dotted cert-manager Secret's certificate and requires a
 * client certificate from the auth-tls-secret's CA (issue 32 item 5), in front of a real nginx
 * that reports the ssl-client-verify header it was sent. curl is the client.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { ROOT, runIpgate, startIpgate, tmpDir } from '../helpers/ipgate';
import { freePort } from '../helpers/net';
import { TestCA } from '../helpers/openssl-certs';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';
import { run } from '../helpers/tls-nginx';

const skip = missing('nginx') || missing('curl');
const FIXTURE = path.join(ROOT, 'test/fixtures/ingress-nginx/13-client-certificates.yaml');

const ipgate = runIpgate;

t.test(
  '--tls off the cluster: written and checked but for the files, valid once they exist, and it serves with client certificates',
  { skip },
  async (t) => {
    const dir = tmpDir('ipgate-import-tls-');
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const tlsDir = path.join(dir, 'tls');
    const out = path.join(dir, 'ipgate.yaml');

    const imp = ipgate(['import', 'ingress-nginx', '-f', FIXTURE, '--tls', '--tls-dir', tlsDir, '-o', out]);
    t.equal(imp.status, 0, `exit 0 where the Secrets are not (${imp.stderr.split('\n')[0]})`);
    t.notOk(fs.existsSync(tlsDir), 'and nothing was read from there');
    const text = fs.readFileSync(out, 'utf8');
    t.match(text, /TLS files are read from .*\/tls\/ when ipgate starts/, 'the file says when the files are checked');
    const config = YAML.parse(text) as { listeners: Array<Record<string, unknown> & { routes: Array<{ upstreams: string[] }> }> };
    const https = config.listeners.find((l) => l.name === 'https')!;
    t.same(
      https.tls,
      {
        certificates: [{ cert: `${tlsDir}/api.partners.example-tls/tls.crt`, key: `${tlsDir}/api.partners.example-tls/tls.key` }],
        clientCA: `${tlsDir}/partners-ca/ca.crt`,
        clientCertificate: 'required',
      },
      'the dotted Secret name is the directory; auth-tls-secret is the client CA',
    );
    t.match(
      imp.stderr,
      /tls\.secrets "\[\{name: api\.partners\.example-tls, secretName: api\.partners\.example-tls\}, \{name: partners-ca, secretName: partners-ca\}\]"/,
    );

    const before = ipgate(['check-config', out]);
    t.equal(before.status, 1, 'check-config reads the files, as ipgate does at start-up');
    t.match(before.stderr, /listeners\[1\]\.tls\.clientCA: ".*\/partners-ca\/ca\.crt": cannot read/);
    t.match(before.stderr, /listeners\[1\]\.tls\.certificates\[0\]\.cert: ".*\/api\.partners\.example-tls\/tls\.crt": cannot read/);

    // The Secrets' files as the chart mounts them: tls.crt and tls.key, and the partners' ca.crt.
    const serverCa = TestCA.root(path.join(dir, 'server-ca'), 'server CA');
    const partners = TestCA.root(path.join(dir, 'partners-ca'), 'partners CA');
    const stranger = TestCA.root(path.join(dir, 'other-ca'), 'another CA');
    const server = serverCa.issue({ name: 'api', dns: ['api.partners.example'] });
    fs.mkdirSync(path.join(tlsDir, 'api.partners.example-tls'), { recursive: true });
    fs.copyFileSync(server.cert, path.join(tlsDir, 'api.partners.example-tls', 'tls.crt'));
    fs.copyFileSync(server.key, path.join(tlsDir, 'api.partners.example-tls', 'tls.key'));
    fs.mkdirSync(path.join(tlsDir, 'partners-ca'));
    fs.copyFileSync(partners.cert, path.join(tlsDir, 'partners-ca', 'ca.crt'));
    const after = ipgate(['check-config', out]);
    t.equal(after.status, 0, after.stderr);
    t.match(after.stdout, /valid \(2 listener\(s\)/);

    const backendPort = await freePort();
    const nginx = await startNginx(
      `http {
  ${nginxHttpPreamble()}
  server { listen 127.0.0.1:${backendPort}; location / { return 200 "api|verify=$http_ssl_client_verify|dn=$http_ssl_client_subject_dn"; } }
}`,
      [backendPort],
    );
    t.teardown(() => nginx.stop());
    for (const l of config.listeners) {
      l.listen = '127.0.0.1:0';
      for (const r of l.routes) r.upstreams = [`127.0.0.1:${backendPort}`];
    }
    const g = await startIpgate(config as unknown as Record<string, unknown>, 'warn');
    t.teardown(() => g.app.shutdown(0));
    const port = g.port('https');
    const curl = (extra: string[]) =>
      run('curl', [
        '-sS',
        '--max-time',
        '10',
        '--interface',
        '127.0.0.2',
        '--cacert',
        serverCa.cert,
        '--resolve',
        `api.partners.example:${port}:127.0.0.1`,
        '-H',
        'ssl-client-verify: SUCCESS',
        '-H',
        'ssl-client-subject-dn: CN=admin',
        ...extra,
        '-w',
        '\n%{http_code}',
        `https://api.partners.example:${port}/`,
      ]);

    const partner = partners.issue({ name: 'partner-one' });
    const ok = await curl(['--cert', partner.cert, '--key', partner.key]);
    t.equal(
      ok.stdout,
      'api|verify=|dn=\n200',
      'a partner certificate gets through; the ssl-client-* headers the client wrote never reach the backend',
    );
    const none = await curl([]);
    t.not(none.stdout.split('\n').pop(), '200', `no certificate: no response (${none.stderr.trim()})`);
    const other = stranger.issue({ name: 'stranger' });
    const wrong = await curl(['--cert', other.cert, '--key', other.key]);
    t.not(wrong.stdout.split('\n').pop(), '200', `a certificate from another CA: no response (${wrong.stderr.trim()})`);

    const plain = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '--interface',
      '127.0.0.2',
      '-H',
      'Host: api.partners.example',
      '-H',
      'ssl-client-verify: SUCCESS',
      '-w',
      '\n%{http_code}',
      `http://127.0.0.1:${g.port('http')}/`,
    ]);
    t.equal(
      plain.stdout,
      'api|verify=|dn=\n200',
      'plaintext, as ingress-nginx served it with ssl-redirect "false": no certificate, and no forged verify header either',
    );
  },
);
