/**
 * The certificates of one TLS listener: the pairs from its `tls.certificates`, a SecureContext per
 * pair built once per load, and the SNI lookup that picks one (docs/tls.md).
 *
 * Lookup: the exact name, then a `*.parent` wildcard covering ONE label (RFC 6125 6.4.3: `*.a.com`
 * serves `x.a.com`, never `a.com` or `y.x.a.com`; the route table's wildcard rule is different on
 * purpose, docs/routes-and-sni.md), then the default (the first pair), or nothing when
 * `unknownSni: refuse`. Among pairs that name the same host, the first in the config wins.
 *
 * Reload: every `reloadIntervalMs` each pair's files are stat()ed (following symlinks, so a
 * Kubernetes Secret volume's `..data` swap shows as a new inode); a changed file is re-read, and a
 * pair whose bytes differ is checked whole (cert-pair.ts). A good pair gets a new context and a
 * new lookup table, swapped in one assignment: handshakes from then on use it, open connections
 * keep the session they have. A bad pair is refused with an error line naming the file and the
 * reason, once per distinct content, and the pair in force stays.
 *
 * Every context of the listener carries the same session id context, derived from the listener
 * and its client-certificate settings (clientCertificate, the clientCA bundle's hash), as nginx
 * derives one per server from its certificates and client CAs:
 *   - OpenSSL resumes a session only in the context it was made in. With a client certificate
 *     asked for and no session id context, it refuses a resumption attempt outright (Node 20,
 *     OpenSSL 3.0: the handshake fails, `ERR_SSL_SESSION_ID_CONTEXT_UNINITIALIZED`) or quietly
 *     does a full handshake (Node 24): curl fetching three URLs over new connections got 200, a
 *     failure, 200.
 *   - A session carries the client certificate verified when it was made, and a ticket outlives a
 *     CA reload (the ticket key does not change with it). With the CA's hash in the context, a
 *     session made under the old CA no longer matches: its client does a full handshake and its
 *     certificate is verified against the new CA.
 * Client-initiated renegotiation is refused by every context (SSL_OP_NO_RENEGOTIATION, as nginx
 * sets it): a TLS 1.2 client asking for one gets a no_renegotiation alert; terminate.ts counts it.
 */
import { constants, createHash } from 'node:crypto';
import fs from 'node:fs';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { TlsCertificateConfig, TlsConfig } from '../schema/tls';
import { asciiLower } from '../route/host-name';
import { loadCaBundle, loadCertPair, type CertPair } from './cert-pair';
import { SESSION_TIMEOUT_S, TicketKeys } from './session-tickets';

/** One configured pair and the material in force for it. */
interface Entry {
  readonly index: number;
  /** The metric label: `name`, else the index. */
  readonly label: string;
  readonly config: TlsCertificateConfig;
  pair: CertPair;
  context: tls.SecureContext;
  /** stat() signature of cert and key when last looked at. */
  stamp: string;
  /** Hash of the last content refused (logged once). */
  refusedHash: string | null;
  /** The files on disk were last found good (in force, or the same bytes as in force). */
  ok: boolean;
  /** ms epoch of the last time they were (the load at start counts). */
  lastSuccessAt: number;
}

/** The lookup in force: replaced whole on a reload. */
interface Table {
  readonly exact: ReadonlyMap<string, tls.SecureContext>;
  /** `*.example.com` as `example.com`. */
  readonly wildcard: ReadonlyMap<string, tls.SecureContext>;
  /** What a client without SNI, or with an unknown name, starts with (no certificate with `refuse`). */
  readonly initial: tls.SecureContext;
  /** The default pair's context, or null with `unknownSni: refuse`. */
  readonly fallback: tls.SecureContext | null;
}

class CertStoreError extends Error {
  readonly code = 'IPGATE_TLS';
}

/** Reload outcomes (ipgate_tls_certificate_reloads_total{result}). */
interface ReloadCounts {
  ok: number;
  refused: number;
}

export class CertStore {
  private readonly entries: Entry[] = [];
  private table: Table;
  private readonly tickets: TicketKeys | null;
  private ca: { pem: Buffer; hash: string; stamp: string; refusedHash: string | null; ok: boolean; lastSuccessAt: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  readonly reloads: ReloadCounts = { ok: 0, refused: 0 };

  /**
   * `config` has absolute paths (validate.ts resolved them). Throws CertStoreError on a bad pair.
   * `tickets`: the listener's ticket keys when another owns them (a cluster worker's, which the
   * primary sends); without it the store makes and rotates its own (session-tickets.ts).
   */
  constructor(
    readonly listener: string,
    private readonly config: Readonly<TlsConfig>,
    private readonly log: Logger,
    tickets?: TicketKeys,
  ) {
    this.tickets = config.sessionTickets ? (tickets ?? new TicketKeys()) : null;
    this.tickets?.onChange(() => this.rebuild(this.tickets!.external ? 'ticket key from the primary' : 'ticket key rotation'));
    if (config.clientCA !== null) {
      const ca = loadCaBundle(config.clientCA);
      if (typeof ca === 'string') throw new CertStoreError(`listener "${listener}" tls.clientCA: ${ca}`);
      this.ca = { pem: ca.pem, hash: ca.hash, stamp: stamp(config.clientCA), refusedHash: null, ok: true, lastSuccessAt: Date.now() };
    }
    config.certificates.forEach((c, index) => {
      const pair = loadCertPair(c.cert, c.key);
      if (typeof pair === 'string') throw new CertStoreError(`listener "${listener}" tls.certificates[${index}]: ${pair}`);
      this.entries.push({
        index,
        label: c.name ?? String(index),
        config: c,
        pair,
        context: this.context(pair),
        stamp: pairStamp(c),
        refusedHash: null,
        ok: true,
        lastSuccessAt: Date.now(),
      });
    });
    this.table = this.buildTable();
  }

  /** The context a handshake starts with (the default certificate, or none with `refuse`). */
  get initial(): tls.SecureContext {
    return this.table.initial;
  }

  /**
   * The context for an SNI name (as the client sent it), or null: no pair serves it (the handshake
   * then goes on with `initial`: the default certificate, or a refusal). terminate.ts builds each
   * handshake's TLSSocket on the context found here, so OpenSSL never switches contexts.
   */
  lookup(servername: string): tls.SecureContext | null {
    const t = this.table;
    let name = asciiLower(servername);
    if (name.endsWith('.')) name = name.slice(0, -1); // RFC 6066: without a trailing dot; some clients send one
    const exact = t.exact.get(name);
    if (exact !== undefined) return exact;
    const dot = name.indexOf('.');
    if (dot > 0) {
      const wild = t.wildcard.get(name.slice(dot + 1));
      if (wild !== undefined) return wild;
    }
    return null;
  }

  /**
   * Whether the SNI name can change what a handshake gets: false with one certificate that also
   * serves unknown names (`unknownSni: first`), where every lookup gives `initial` (terminate.ts
   * then reads no ClientHello before the handshake).
   */
  get sniDecides(): boolean {
    return this.entries.length > 1 || this.config.unknownSni !== 'first';
  }

  /** Whether a lookup miss is served by the first certificate (`unknownSni: first`). */
  get hasFallback(): boolean {
    return this.table.fallback !== null;
  }

  /** Each pair's label and leaf notAfter (seconds): ipgate_tls_certificate_expiry_timestamp_seconds. */
  expiries(): { label: string; notAfter: number }[] {
    return this.entries.map((e) => ({ label: e.label, notAfter: e.pair.notAfter }));
  }

  /**
   * Whether each pair's files (and the client CA, label `clientCA`) were last found good, and when
   * they last were: ipgate_config_last_reload_successful{kind="certificate"} (config/reload-status.ts).
   */
  reloadStates(): { label: string; ok: boolean; lastSuccessAt: number }[] {
    const out = this.entries.map((e) => ({ label: e.label, ok: e.ok, lastSuccessAt: e.lastSuccessAt }));
    if (this.ca !== null) out.push({ label: 'clientCA', ok: this.ca.ok, lastSuccessAt: this.ca.lastSuccessAt });
    return out;
  }

  /** Each pair's label and the names it serves (log line at start and reload). */
  describe(): { certificate: string; names: string[]; keyType: string; chain: number; notAfter: string }[] {
    return this.entries.map((e) => ({
      certificate: e.label,
      names: this.names(e),
      keyType: e.pair.keyType,
      chain: e.pair.chainLength,
      notAfter: e.pair.leaf.validTo,
    }));
  }

  /** Start watching the files (and rotating ticket keys, when they are this store's own). */
  start(): void {
    this.tickets?.start();
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.poll(), this.config.reloadIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.tickets?.stop();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look at every file; public for tests that do not want to wait for the interval. */
  poll(): void {
    let changed = false;
    if (this.ca !== null && this.config.clientCA !== null) {
      const s = stamp(this.config.clientCA);
      if (s !== this.ca.stamp) {
        this.ca.stamp = s;
        const ca = loadCaBundle(this.config.clientCA);
        if (typeof ca === 'string') {
          this.refused(this.config.clientCA, 'clientCA', ca, s, this.ca);
        } else if (ca.hash === this.ca.hash) {
          this.good(this.ca); // touched, or put back: the bytes in force
        } else {
          this.ca = { pem: ca.pem, hash: ca.hash, stamp: s, refusedHash: null, ok: true, lastSuccessAt: Date.now() };
          this.log.info({ listener: this.listener, file: this.config.clientCA, certificates: ca.count }, 'TLS client CA reloaded');
          this.reloads.ok++;
          for (const e of this.entries) e.context = this.context(e.pair);
          changed = true;
        }
      }
    }
    for (const e of this.entries) {
      const s = pairStamp(e.config);
      if (s === e.stamp) continue;
      e.stamp = s;
      const pair = loadCertPair(e.config.cert, e.config.key);
      if (typeof pair === 'string') {
        this.refused(e.config.cert, e.label, pair, s, e);
        continue;
      }
      if (pair.hash === e.pair.hash) {
        this.good(e); // touched, or put back after a refusal: the bytes in force
        continue;
      }
      let context: tls.SecureContext;
      try {
        context = this.context(pair);
      } catch (err) {
        this.refused(e.config.cert, e.label, `OpenSSL refused the pair: ${(err as Error).message}`, pair.hash, e);
        continue;
      }
      e.pair = pair;
      e.context = context;
      e.refusedHash = null;
      this.good(e);
      this.reloads.ok++;
      changed = true;
      this.log.info(
        { listener: this.listener, certificate: e.label, file: e.config.cert, names: this.names(e), notAfter: pair.leaf.validTo },
        'TLS certificate reloaded: new handshakes use it',
      );
    }
    if (changed) this.table = this.buildTable();
  }

  private good(holder: { refusedHash: string | null; ok: boolean; lastSuccessAt: number }): void {
    holder.refusedHash = null;
    holder.ok = true;
    holder.lastSuccessAt = Date.now();
  }

  private refused(file: string, label: string, reason: string, key: string, holder: { refusedHash: string | null; ok: boolean }): void {
    holder.ok = false;
    // Once per distinct content: a file half written, then completed, logs at most twice.
    if (holder.refusedHash === key) return;
    holder.refusedHash = key;
    this.reloads.refused++;
    this.log.error({ listener: this.listener, certificate: label, file, reason }, 'TLS certificate reload refused: the one in force stays');
  }

  /** New contexts for every pair (a new ticket key). */
  private rebuild(why: string): void {
    try {
      for (const e of this.entries) e.context = this.context(e.pair);
      this.table = this.buildTable();
    } catch (err) {
      this.log.error({ listener: this.listener, err: (err as Error).message, why }, 'TLS contexts not rebuilt; the ones in force stay');
    }
  }

  private context(pair: CertPair | null): tls.SecureContext {
    const c = this.config;
    return tls.createSecureContext({
      ...(pair !== null ? { cert: pair.certPem, key: pair.keyPem } : {}),
      minVersion: c.minVersion,
      maxVersion: c.maxVersion,
      ...(this.ca !== null ? { ca: this.ca.pem } : {}),
      sessionIdContext: this.sessionIdContext(),
      secureOptions: constants.SSL_OP_NO_RENEGOTIATION | (this.tickets !== null ? 0 : constants.SSL_OP_NO_TICKET),
      ...(this.tickets !== null ? { ticketKeys: this.tickets.current, sessionTimeout: SESSION_TIMEOUT_S } : {}),
    });
  }

  /**
   * The session id context of this listener's contexts (see the top of this file): 32 hex
   * characters (OpenSSL takes at most 32 bytes), the same in every worker (a ticket one issues
   * resumes on another), different for another listener, another clientCertificate setting or
   * another CA bundle.
   */
  sessionIdContext(): string {
    return createHash('sha256')
      .update(`ipgate tls\0${this.listener}\0${this.config.clientCertificate}\0${this.ca?.hash ?? ''}`)
      .digest('hex')
      .slice(0, 32);
  }

  private names(e: Entry): string[] {
    return e.config.hosts !== null ? e.config.hosts.map(asciiLower) : e.pair.names;
  }

  private buildTable(): Table {
    const exact = new Map<string, tls.SecureContext>();
    const wildcard = new Map<string, tls.SecureContext>();
    for (const e of this.entries) {
      for (const name of this.names(e)) {
        if (name.startsWith('*.')) {
          if (!wildcard.has(name.slice(2))) wildcard.set(name.slice(2), e.context);
        } else if (!exact.has(name)) {
          exact.set(name, e.context);
        }
      }
    }
    const fallback = this.config.unknownSni === 'first' ? this.entries[0]!.context : null;
    // With `refuse`, a handshake without a matching name goes on with a context holding no
    // certificate, and OpenSSL fails it (handshake_failure alert): no certificate, so no name, is
    // shown to a client that did not ask for one we serve (nginx `ssl_reject_handshake on`).
    return { exact, wildcard, fallback, initial: fallback ?? this.context(null) };
  }
}

function stamp(file: string): string {
  try {
    const s = fs.statSync(file);
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch (err) {
    return `error:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
  }
}

function pairStamp(c: TlsCertificateConfig): string {
  return `${stamp(c.cert)}|${stamp(c.key)}`;
}
