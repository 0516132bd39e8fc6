/**
 * Upstream connect time for sockets an http.Agent opens (the HTTP path's keep-alive pool and the
 * per-client PROXY-header agents): the agent's createConnection is wrapped once, at construction,
 * so the cost (one timestamp and one `connect` listener) is paid per new upstream connection, never
 * per request that reuses a pooled one.
 */
import type { Agent } from 'node:http';
import type net from 'node:net';
import type { FixedHistogram } from './fixed-histogram';

type CreateConnection = (this: Agent, ...args: unknown[]) => net.Socket | undefined;

export function timeConnects(agent: Agent, histogram: FixedHistogram): Agent {
  const a = agent as unknown as { createConnection: CreateConnection };
  const create = a.createConnection;
  a.createConnection = function timedCreateConnection(this: Agent, ...args: unknown[]): net.Socket | undefined {
    const startedAt = performance.now();
    const socket = create.apply(this, args);
    socket?.once('connect', () => histogram.observe((performance.now() - startedAt) / 1000));
    return socket;
  };
  return agent;
}
