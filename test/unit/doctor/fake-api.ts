/**
 * A loopback stand-in for the Kubernetes API server: routes by path to recorded-shape JSON in
 * test/fixtures/k8s, records every request (path, query, Authorization) for assertions.
 * Unrouted paths answer 404 with the Status the API server gives for a resource it does not serve.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { FIXTURES as ROOT_FIXTURES } from '../../helpers/root';

export const FIXTURES = path.join(ROOT_FIXTURES, 'k8s');

export function fixture(name: string): unknown {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8'));
}

export interface Answer {
  status?: number;
  /** A file in test/fixtures/k8s. */
  fixture?: string;
  /** Or a body given inline. */
  body?: unknown;
}

/** A fixture name (200), an Answer, or a function of the request URL (for pages, query checks). */
export type Route = string | Answer | ((url: URL) => Answer);

export interface RecordedRequest {
  readonly path: string;
  readonly query: string;
  readonly authorization?: string;
}

export interface FakeApi {
  readonly url: string;
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startFakeApi(routes: Record<string, Route>): Promise<FakeApi> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    requests.push({ path: url.pathname, query: url.search, authorization: req.headers.authorization });
    const route = routes[url.pathname];
    const answer: Answer =
      route === undefined
        ? { status: 404, fixture: 'status-404-resource-not-served.json' }
        : typeof route === 'string'
          ? { fixture: route }
          : typeof route === 'function'
            ? route(url)
            : route;
    const body = answer.fixture ? fixture(answer.fixture) : answer.body;
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(answer.status ?? 200, {
      'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A kubeconfig with token auth pointing at `server`, written into `dir`; returns its path. */
export function writeKubeconfig(dir: string, server: string, token: string, namespace = 'ipgate'): string {
  const file = path.join(dir, 'kubeconfig');
  fs.writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: ${server}
contexts:
- name: lab
  context:
    cluster: lab
    user: doctor
    namespace: ${namespace}
current-context: lab
users:
- name: doctor
  user:
    token: ${token}
`,
  );
  return file;
}

/** Collects what doctorMain writes. */
export function sink(): { write(chunk: string): boolean; text(): string } {
  let out = '';
  return {
    write(chunk: string) {
      out += chunk;
      return true;
    },
    text: () => out,
  };
}
