/**
 * What `ipgate import` reports besides the config: every ingress-nginx behaviour not carried over,
 * each named with where it came from (docs/migrating-from-ingress-nginx.md, "The report").
 */

/** One thing the report names: where it came from, what, its value, and why. */
export interface Finding {
  /** `Ingress ns/name` or `ConfigMap ns/name`. */
  source: string;
  /** An annotation or ConfigMap key, `spec.rules[0].http.paths[1]`, `spec.tls[0]`, ... */
  item: string;
  value?: string;
  reason: string;
}

export interface ImportReport {
  /** `converted`: made at least one route; `skipped`: another class, no class, canary; the rest made none. */
  ingresses: { read: number; converted: number; skipped: number };
  routes: number;
  allowlists: number;
  /**
   * Why no config was written although routes could be made: the source asks for trust only the
   * operator can narrow (a trust-all range), or a flag asks for more than the source trusted.
   */
  refused: Finding[];
  /** ingress-nginx behaviour that the config does not reproduce. */
  unconverted: Finding[];
  /** Converted, but with a difference worth knowing. */
  notes: Finding[];
  /** Ingresses not converted at all (another class, canary). */
  skipped: Finding[];
  /** Annotations that are not ingress-nginx settings (cert-manager, kubectl, ...): nothing to convert. */
  ignored: Finding[];
}
