/**
 * The PROXY header stage (docs/architecture.md "The data path"): a connection's first bytes are
 * gathered (gather.ts) until the decoder says done / none / error, within `headerTimeoutMs`, and
 * derive.ts turns that into who the client is. Nothing else happens for the connection until then
 * (no dial, no allowlist).
 *
 * A listener holds two of these, one for trusted peers and one for the rest, so the per-connection
 * fact the decision needs (is the peer a trusted source) is chosen once at accept and costs no
 * closure or object per connection.
 */
import { afterHeader, type HeaderVersion, type IdentityOutcome, type ProxyMode } from '../identity/derive';
import type { PpReason } from '../proxy-protocol/codes';
import { decodeProxyHeader, type DecodeOptions } from '../proxy-protocol/decoder';
import type { Connection } from '../connection/connection';
import type { GatherStage } from '../connection/gather';

/** Who takes the outcome: the listener (one object, like tls/hello-stage.ts's HelloSink). */
export interface HeaderSink {
  /** `buf`: every byte read so far (the header, then payload to forward). */
  headerRead(conn: Connection, outcome: IdentityOutcome, buf: Buffer): void;
}

interface HeaderStageOptions {
  readonly mode: ProxyMode;
  readonly headerTimeoutMs: number;
  readonly maxV2Length: number;
}

function rejected(reason: PpReason, version: HeaderVersion): IdentityOutcome {
  return Object.freeze({ ok: false, reason, version });
}
/* The outcomes that need no decoder answer, built once. */
const TIMEOUT_NOTHING = rejected('pp_timeout', 'none');
const TIMEOUT_PARTIAL = rejected('pp_timeout', 'unknown');
const ENDED_NOTHING = rejected('pp_missing', 'unknown');
const ENDED_PARTIAL = rejected('pp_truncated', 'unknown');

export class HeaderStage implements GatherStage<IdentityOutcome> {
  readonly timeoutMs: number;
  private readonly mode: ProxyMode;
  private readonly decodeOptions: DecodeOptions;

  constructor(
    options: HeaderStageOptions,
    private readonly trusted: boolean,
    private readonly sink: HeaderSink,
  ) {
    this.mode = options.mode;
    this.timeoutMs = options.headerTimeoutMs;
    this.decodeOptions = { maxV2Length: options.maxV2Length };
  }

  decide(buf: Buffer): IdentityOutcome | null {
    const r = decodeProxyHeader(buf, this.decodeOptions);
    if (r.kind === 'more') return null;
    return afterHeader(r, buf[0]!, this.mode, this.trusted);
  }

  timedOut(buf: Buffer): IdentityOutcome {
    return buf.length === 0 ? TIMEOUT_NOTHING : TIMEOUT_PARTIAL;
  }

  ended(buf: Buffer): IdentityOutcome {
    return buf.length === 0 ? ENDED_NOTHING : ENDED_PARTIAL;
  }

  gathered(conn: Connection, outcome: IdentityOutcome, buf: Buffer): void {
    this.sink.headerRead(conn, outcome, buf);
  }
}
