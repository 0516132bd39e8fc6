/**
 * Whether each source of live configuration was last read good, and when it last was: the config
 * file (with the list files it names), each ConfigMap holding declarative lists, each certificate
 * file pair (src/tls/cert-store.ts keeps its own, read through the same shape). Published as
 * `ipgate_config_last_reload_successful{kind,source}` and
 * `ipgate_config_last_reload_successful_timestamp_seconds{kind,source}` (metrics.ts; the names are
 * ingress-nginx's `nginx_ingress_controller_config_last_reload_successful` and `..._timestamp_seconds`),
 * so a refused change (a GitOps push of `10.20.0.0/33`) shows in the metrics and fires the chart's
 * IpgateConfigReloadFailed alert, not only in a log line and a /readyz warning.
 *
 * A refused source keeps everything as it was (the config's lists and routes in force stay: the
 * reload is all or nothing); its gauge is 0 until a later read of it is good. Sources are a bounded
 * set: the config file and the ConfigMaps and certificates it names.
 */

type SourceKind = 'file' | 'configmap' | 'certificate';

interface SourceState {
  readonly kind: SourceKind;
  /** The config file's path, `namespace/name` of a ConfigMap, `listener/certificate` of a pair. */
  readonly source: string;
  /** The last read of this source was good (and applied, with the rest of its reload). */
  readonly ok: boolean;
  /** ms epoch of the last good read; the start-up load counts. */
  readonly lastSuccessAt: number;
}

export class ReloadStatus {
  private readonly sources = new Map<string, SourceState>();

  /** One read of a source: good (`ok`) or refused. */
  record(kind: SourceKind, source: string, ok: boolean, at = Date.now()): void {
    const key = `${kind}\0${source}`;
    const before = this.sources.get(key);
    // A source refused at its first read (a ConfigMap added by a reload) has had no success: 0.
    this.sources.set(key, { kind, source, ok, lastSuccessAt: ok ? at : (before?.lastSuccessAt ?? 0) });
  }

  /** Stop reporting a source the config no longer names. */
  forget(kind: SourceKind, source: string): void {
    this.sources.delete(`${kind}\0${source}`);
  }

  /** The sources of `kind` reported now. */
  sourcesOf(kind: SourceKind): string[] {
    return [...this.sources.values()].filter((s) => s.kind === kind).map((s) => s.source);
  }

  list(): SourceState[] {
    return [...this.sources.values()];
  }
}

/** A ConfigMap watch's health as the metrics publish it (metrics.ts WatchState). */
interface WatchHealth {
  configMap: string;
  use: 'lists' | 'store';
  healthy: boolean;
  lastSuccessAt: number | null;
}

/**
 * The watches this process runs: each declarative lists ConfigMap (configmap-lists.ts `status()`)
 * and the allowlist store's ConfigMap (store/kubernetes-store.ts `status()`, when the store is
 * one). Structural types: this module imports neither.
 */
export function watchHealth(
  lists: { status(): Record<string, { lastError: string | null; lastSuccessAt: number | null }> } | null,
  store: { readonly kind: string; status?(): object } | null,
): WatchHealth[] {
  const out: WatchHealth[] = [];
  for (const [configMap, st] of Object.entries(lists?.status() ?? {})) {
    out.push({ configMap, use: 'lists', healthy: st.lastError === null, lastSuccessAt: st.lastSuccessAt });
  }
  if (store?.kind === 'kubernetes') {
    const st = store.status?.() as { lastError?: string | null; lastSyncAt?: number | null; configMap?: string } | undefined;
    if (st?.configMap !== undefined)
      out.push({ configMap: st.configMap, use: 'store', healthy: (st.lastError ?? null) === null, lastSuccessAt: st.lastSyncAt ?? null });
  }
  return out;
}
