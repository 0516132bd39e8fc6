/**
 * An Ingress backend as an ipgate upstream: the Service's cluster DNS name and port
 * (`name.namespace.svc.<domain>:port`). A named port is resolved through the Service object
 * (from the cluster, or from the input files); a resource backend has no equivalent.
 */
import { isRecord, str, type KubeObject } from './objects';
import type { ImportReport } from './report';

/** The upstream `host:port`, or null after reporting why there is none. */
export function backendUpstream(
  backend: unknown,
  ns: string,
  services: Map<string, KubeObject>,
  from: 'file' | 'cluster',
  clusterDomain: string,
  source: string,
  at: string,
  report: ImportReport,
): string | null {
  if (!isRecord(backend)) {
    report.unconverted.push({ source, item: at, reason: 'no backend' });
    return null;
  }
  let name: string | undefined;
  let port: unknown;
  if (isRecord(backend.service)) {
    name = str(backend.service.name);
    const p = backend.service.port;
    port = isRecord(p) ? (p.number ?? p.name) : undefined;
  } else if (backend.serviceName !== undefined) {
    // networking.k8s.io/v1beta1 and extensions/v1beta1 (removed in Kubernetes 1.22)
    name = str(backend.serviceName);
    port = backend.servicePort;
  } else if (isRecord(backend.resource)) {
    report.unconverted.push({
      source,
      item: at,
      value: `${str(backend.resource.kind) ?? '?'} ${str(backend.resource.name) ?? '?'}`,
      reason: 'a resource backend: ipgate forwards to Services (host:port) only',
    });
    return null;
  }
  if (name === undefined || name === '') {
    report.unconverted.push({ source, item: at, reason: 'no service name' });
    return null;
  }
  let number: number | null = typeof port === 'number' ? port : typeof port === 'string' && /^[0-9]+$/.test(port) ? Number(port) : null;
  if (number === null) {
    if (typeof port !== 'string' || port === '') {
      report.unconverted.push({ source, item: at, value: name, reason: 'no service port' });
      return null;
    }
    const svc = services.get(`${ns}/${name}`);
    if (svc === undefined) {
      report.unconverted.push({
        source,
        item: `${at}.service.port.name`,
        value: `${name}:${port}`,
        reason:
          from === 'file'
            ? `a named port cannot be resolved without the Service: add Service ${ns}/${name} to the input (or read the cluster)`
            : `Service ${ns}/${name} was not found`,
      });
      return null;
    }
    const ports = isRecord(svc.spec) && Array.isArray(svc.spec.ports) ? svc.spec.ports : [];
    const found = ports.find((sp: unknown) => isRecord(sp) && sp.name === port) as Record<string, unknown> | undefined;
    if (found === undefined || typeof found.port !== 'number') {
      report.unconverted.push({
        source,
        item: `${at}.service.port.name`,
        value: `${name}:${port}`,
        reason: `Service ${ns}/${name} has no port named ${JSON.stringify(port)}`,
      });
      return null;
    }
    number = found.port;
    report.notes.push({
      source,
      item: `${at}.service.port.name`,
      value: `${name}:${port}`,
      reason: `resolved through Service ${ns}/${name} to port ${number}`,
    });
  }
  if (number < 1 || number > 65535) {
    report.unconverted.push({ source, item: at, value: `${name}:${number}`, reason: 'port out of range' });
    return null;
  }
  return `${name}.${ns}.svc.${clusterDomain}:${number}`;
}
