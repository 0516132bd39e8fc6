/**
 * The per-client limits' checks beyond the schema (docs/edge-rules.md "Rate and connection
 * limits"): each limit where it applies (requests on HTTP, connection rate on TCP, route limits on
 * HTTP routes), and each `exempt` name a defined allowlist.
 */
import type { ListenerConfig } from '../schema/config';
import { problem } from '../schema/problem';

export function checkLimits(at: string, l: Readonly<ListenerConfig>, lists: readonly string[], problems: string[]): void {
  const exempt = (field: string, names: readonly string[]): void => {
    names.forEach((name, k) => {
      if (!lists.includes(name)) {
        problems.push(
          problem(
            `${field}.exempt[${k}]`,
            name,
            `no such allowlist (defined: ${lists.length ? lists.join(', ') : 'none'}; define it under "allowlists")`,
          ),
        );
      }
    });
  };
  const ll = l.limits;
  if (ll !== undefined) {
    if (l.mode === 'tcp' && ll.requests !== null) {
      problems.push(
        problem(
          `${at}.limits.requests`,
          ll.requests,
          `applies to HTTP listeners only (${at}.mode is "tcp"): limit new connections with limits.connectionRate`,
        ),
      );
    }
    if (l.mode === 'http' && ll.connectionRate !== null) {
      problems.push(
        problem(
          `${at}.limits.connectionRate`,
          ll.connectionRate,
          `applies to TCP listeners only (${at}.mode is "http"): limit requests with limits.requests`,
        ),
      );
    }
    if (ll.requests !== null) exempt(`${at}.limits.requests`, ll.requests.exempt);
    if (ll.concurrent !== null) exempt(`${at}.limits.concurrent`, ll.concurrent.exempt);
    if (ll.connectionRate !== null) exempt(`${at}.limits.connectionRate`, ll.connectionRate.exempt);
  }
  l.routes?.forEach((r, i) => {
    const rl = r.limits;
    if (rl === undefined) return;
    const rat = `${at}.routes[${i}].limits`;
    if (l.mode === 'tcp') {
      problems.push(problem(rat, rl, `applies to HTTP routes only (${at}.mode is "tcp"): set the TCP listener's own ${at}.limits`));
      return;
    }
    if (rl.requests) exempt(`${rat}.requests`, rl.requests.exempt);
    if (rl.concurrent) exempt(`${rat}.concurrent`, rl.concurrent.exempt);
  });
}
