/**
 * A hand-built TLS 1.3 client (RFC 8446) from node:crypto primitives, for tests that need a hello
 * no TLS library would send: a second ClientHello after a HelloRetryRequest that names another
 * server, or one sent before the server has answered the first. It offers TLS_AES_128_GCM_SHA256
 * only, x25519 and/or P-256 key shares, ECDSA/RSA signature algorithms; it does the key schedule
 * (HKDF over HMAC-SHA256), decrypts the server's flight, reports the certificate's subject (which
 * server block served), checks the server's Finished, sends its own, and then one HTTP request,
 * returning the response. It does not verify the certificate chain or CertificateVerify: the
 * tests ask which certificate was presented, not whether to trust it.
 *
 * Also exported: the record and hello builders the raw test backends use (a HelloRetryRequest
 * written by hand, byte by byte).
 */
import crypto from 'node:crypto';
import net from 'node:net';

/** RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest. */
export const HRR_RANDOM = crypto.createHash('sha256').update('HelloRetryRequest').digest();

export type Group = 'x25519' | 'p256';
const GROUP_ID: Record<Group, number> = { x25519: 0x001d, p256: 0x0017 };

const CT_CCS = 20;
const CT_ALERT = 21;
const CT_HANDSHAKE = 22;
const CT_APPLICATION = 23;

export function u8(n: number): Buffer {
  return Buffer.from([n]);
}
export function u16(n: number): Buffer {
  return Buffer.from([n >> 8, n & 0xff]);
}
export function u24(n: number): Buffer {
  return Buffer.from([n >> 16, (n >> 8) & 0xff, n & 0xff]);
}
function vec8(b: Buffer): Buffer {
  return Buffer.concat([u8(b.length), b]);
}
function vec16(b: Buffer): Buffer {
  return Buffer.concat([u16(b.length), b]);
}
function ext(type: number, data: Buffer): Buffer {
  return Buffer.concat([u16(type), vec16(data)]);
}

/** A handshake message: msg_type[1] length[3] body. */
export function handshakeMessage(type: number, body: Buffer): Buffer {
  return Buffer.concat([u8(type), u24(body.length), body]);
}

/** `payload` in records of `type` (plaintext), cut into fragments of at most `fragment` bytes. */
export function record(type: number, payload: Buffer, version = 0x0303, fragment = 16384): Buffer {
  const out: Buffer[] = [];
  for (let p = 0; p < payload.length || p === 0; p += fragment) {
    const piece = payload.subarray(p, Math.min(payload.length, p + fragment));
    out.push(u8(type), u16(version), u16(piece.length), piece);
    if (payload.length === 0) break;
  }
  return Buffer.concat(out);
}

/** The compatibility ChangeCipherSpec record (RFC 8446 D.4). */
export const CCS_RECORD = Buffer.from([CT_CCS, 3, 3, 0, 1, 1]);

class KeyShare {
  readonly pub: Buffer;
  private readonly secretFn: (peer: Buffer) => Buffer;
  constructor(readonly group: Group) {
    if (group === 'p256') {
      const ecdh = crypto.createECDH('prime256v1');
      ecdh.generateKeys();
      this.pub = ecdh.getPublicKey();
      this.secretFn = (peer) => ecdh.computeSecret(peer);
    } else {
      const { publicKey, privateKey } = crypto.generateKeyPairSync('x25519');
      this.pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
      this.secretFn = (peer) =>
        crypto.diffieHellman({
          privateKey,
          publicKey: crypto.createPublicKey({
            key: Buffer.concat([Buffer.from('302a300506032b656e032100', 'hex'), peer]),
            format: 'der',
            type: 'spki',
          }),
        });
    }
  }
  secret(peer: Buffer): Buffer {
    return this.secretFn(peer);
  }
}

export interface HelloFields {
  /** server_name (null: none). */
  sni: string | null;
  /** ALPN protocols (absent or []: no extension). */
  alpn?: string[];
  /** supported_groups, in order (default x25519, P-256). */
  groups?: Group[];
  /** Offer early_data (the extension only: no 0-RTT keys here). */
  earlyData?: boolean;
  /** Extra raw extensions, appended (type[2] length[2] data). */
  extensions?: Buffer[];
}

/** The fields a second hello keeps from the first (RFC 8446 4.1.2). */
interface HelloState {
  random: Buffer;
  sessionId: Buffer;
}

function helloBody(f: HelloFields, state: HelloState, shares: readonly KeyShare[], cookie: Buffer | null): Buffer {
  const exts: Buffer[] = [];
  if (f.sni !== null) {
    const name = Buffer.from(f.sni, 'latin1');
    exts.push(ext(0, vec16(Buffer.concat([u8(0), vec16(name)]))));
  }
  exts.push(ext(10, vec16(Buffer.concat((f.groups ?? ['x25519', 'p256']).map((g) => u16(GROUP_ID[g]))))));
  // ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256, ecdsa_secp384r1_sha384, rsa_pss_rsae_sha384
  exts.push(ext(13, vec16(Buffer.from('04030804040105030805', 'hex'))));
  if (f.alpn !== undefined && f.alpn.length > 0) {
    exts.push(ext(16, vec16(Buffer.concat(f.alpn.map((p) => vec8(Buffer.from(p, 'latin1')))))));
  }
  exts.push(ext(43, vec8(u16(0x0304))));
  exts.push(ext(45, vec8(u8(1)))); // psk_key_exchange_modes: psk_dhe_ke (OpenSSL wants it to send tickets)
  if (f.earlyData === true && cookie === null) exts.push(ext(42, Buffer.alloc(0)));
  if (cookie !== null) exts.push(ext(44, vec16(cookie)));
  exts.push(ext(51, vec16(Buffer.concat(shares.map((s) => Buffer.concat([u16(GROUP_ID[s.group]), vec16(s.pub)]))))));
  for (const e of f.extensions ?? []) exts.push(e);
  return Buffer.concat([
    u16(0x0303),
    state.random,
    vec8(state.sessionId),
    vec16(u16(0x1301)), // TLS_AES_128_GCM_SHA256
    vec8(u8(0)),
    vec16(Buffer.concat(exts)),
  ]);
}

/** A whole ClientHello record with fresh random and key shares (for raw tests that only send one). */
export function clientHelloRecord(f: HelloFields, keyShares: Group[] = ['x25519']): Buffer {
  const state = { random: crypto.randomBytes(32), sessionId: crypto.randomBytes(32) };
  return record(
    CT_HANDSHAKE,
    handshakeMessage(
      1,
      helloBody(
        f,
        state,
        keyShares.map((g) => new KeyShare(g)),
        null,
      ),
    ),
    0x0301,
  );
}

/**
 * A ServerHello (or, with `random` = HRR_RANDOM, a HelloRetryRequest) handshake message, TLS 1.3
 * form: supported_versions 0x0304 and a key_share naming `group` (an HRR's selected_group).
 */
export function serverHelloMessage(random: Buffer, group: Group = 'p256', sessionId = Buffer.alloc(32, 0x11)): Buffer {
  const keyShare = random.equals(HRR_RANDOM) ? u16(GROUP_ID[group]) : Buffer.concat([u16(GROUP_ID[group]), vec16(Buffer.alloc(65, 4))]);
  return handshakeMessage(
    2,
    Buffer.concat([
      u16(0x0303),
      random,
      vec8(sessionId),
      u16(0x1301),
      u8(0),
      vec16(Buffer.concat([ext(43, u16(0x0304)), ext(51, keyShare)])),
    ]),
  );
}

// --- key schedule (RFC 8446 7.1), SHA-256 ---------------------------------------------------------

const sha256 = (b: Buffer): Buffer => crypto.createHash('sha256').update(b).digest();
const hmac = (key: Buffer, data: Buffer): Buffer => crypto.createHmac('sha256', key).update(data).digest();
const ZEROS = Buffer.alloc(32);

/** HKDF-Extract (RFC 5869 2.2). crypto.hkdfSync does extract and expand in one call; TLS 1.3 needs them apart. */
function extract(salt: Buffer, ikm: Buffer): Buffer {
  return hmac(salt, ikm);
}

/** HKDF-Expand-Label (RFC 8446 7.1), for outputs up to one hash length. */
function expandLabel(secret: Buffer, label: string, context: Buffer, length: number): Buffer {
  const info = Buffer.concat([u16(length), vec8(Buffer.from(`tls13 ${label}`)), vec8(context)]);
  return hmac(secret, Buffer.concat([info, u8(1)])).subarray(0, length);
}

function deriveSecret(secret: Buffer, label: string, transcript: Buffer): Buffer {
  return expandLabel(secret, label, sha256(transcript), 32);
}

/** One direction's AES-128-GCM record protection (RFC 8446 5.2, 5.3). */
class Protection {
  private readonly key: Buffer;
  private readonly iv: Buffer;
  private seq = 0n;
  constructor(secret: Buffer) {
    this.key = expandLabel(secret, 'key', Buffer.alloc(0), 16);
    this.iv = expandLabel(secret, 'iv', Buffer.alloc(0), 12);
  }
  private nonce(): Buffer {
    const n = Buffer.from(this.iv);
    const s = Buffer.alloc(8);
    s.writeBigUInt64BE(this.seq++);
    for (let i = 0; i < 8; i++) n[4 + i]! ^= s[i]!;
    return n;
  }
  seal(type: number, data: Buffer): Buffer {
    const inner = Buffer.concat([data, u8(type)]);
    const header = Buffer.concat([u8(CT_APPLICATION), u16(0x0303), u16(inner.length + 16)]);
    const c = crypto.createCipheriv('aes-128-gcm', this.key, this.nonce());
    c.setAAD(header);
    return Buffer.concat([header, c.update(inner), c.final(), c.getAuthTag()]);
  }
  open(header: Buffer, payload: Buffer): { type: number; data: Buffer } {
    const d = crypto.createDecipheriv('aes-128-gcm', this.key, this.nonce());
    d.setAAD(header);
    d.setAuthTag(payload.subarray(payload.length - 16));
    const inner = Buffer.concat([d.update(payload.subarray(0, payload.length - 16)), d.final()]);
    let end = inner.length;
    while (end > 0 && inner[end - 1] === 0) end--;
    return { type: inner[end - 1]!, data: inner.subarray(0, end - 1) };
  }
}

// --- reading the server -----------------------------------------------------------------------

interface Rec {
  type: number;
  header: Buffer;
  payload: Buffer;
}

/** Records off a socket: `next()` resolves with one, or null once the peer closed. */
class RecordReader {
  private buf = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | null = null;
  constructor(socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.wake?.();
    });
    const end = (): void => {
      this.ended = true;
      this.wake?.();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }
  async next(ms: number): Promise<Rec | null> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.buf.length >= 5) {
        const len = this.buf.readUInt16BE(3);
        if (this.buf.length >= 5 + len) {
          const r = { type: this.buf[0]!, header: this.buf.subarray(0, 5), payload: this.buf.subarray(5, 5 + len) };
          this.buf = this.buf.subarray(5 + len);
          return r;
        }
      }
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('tls13-client: no record from the server in time');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          this.wake = null;
          resolve();
        };
      });
    }
  }
}

/** Handshake messages out of a record stream (they may span or share records). */
class Messages {
  private buf = Buffer.alloc(0);
  push(data: Buffer): void {
    this.buf = Buffer.concat([this.buf, data]);
  }
  take(): Buffer | null {
    if (this.buf.length < 4) return null;
    const len = this.buf.readUIntBE(1, 3);
    if (this.buf.length < 4 + len) return null;
    const m = this.buf.subarray(0, 4 + len);
    this.buf = this.buf.subarray(4 + len);
    return m;
  }
}

interface ServerHelloView {
  hrr: boolean;
  group: number | null;
  keyShare: Buffer | null;
  cookie: Buffer | null;
}

function parseServerHello(m: Buffer): ServerHelloView {
  let p = 4 + 2;
  const random = m.subarray(p, p + 32);
  p += 32;
  p += 1 + m[p]!; // session_id echo
  p += 2 + 1; // cipher_suite, compression
  const end = p + 2 + m.readUInt16BE(p);
  p += 2;
  const v: ServerHelloView = { hrr: random.equals(HRR_RANDOM), group: null, keyShare: null, cookie: null };
  while (p < end) {
    const type = m.readUInt16BE(p);
    const len = m.readUInt16BE(p + 2);
    const data = m.subarray(p + 4, p + 4 + len);
    if (type === 51) {
      v.group = data.readUInt16BE(0);
      if (!v.hrr) v.keyShare = data.subarray(4, 4 + data.readUInt16BE(2));
    } else if (type === 44) {
      v.cookie = data.subarray(2, 2 + data.readUInt16BE(0));
    }
    p += 4 + len;
  }
  return v;
}

/** The first certificate's subject from a Certificate message (RFC 8446 4.4.2). */
function certificateSubject(m: Buffer): string {
  let p = 4;
  p += 1 + m[p]!; // certificate_request_context
  p += 3; // certificate_list length
  const len = m.readUIntBE(p, 3);
  return new crypto.X509Certificate(m.subarray(p + 3, p + 3 + len)).subject;
}

// --- the handshake ----------------------------------------------------------------------------

export interface Tls13Options extends HelloFields {
  port: number;
  host?: string;
  /** Bind the client socket here (a different client per 127.0.0.x). */
  localAddress?: string;
  /** Key shares in the first hello (default x25519 only; [] sends an empty key_share). */
  keyShares?: Group[];
  /** After a HelloRetryRequest: what the second hello changes (default nothing). */
  retry?: Partial<HelloFields>;
  /**
   * Send the second hello right after the first, before reading anything (its key share for
   * `pipelineGroup`, default P-256), as a client that expects the retry would.
   */
  pipeline?: boolean;
  pipelineGroup?: Group;
  /** The HTTP request to send once the handshake is done (default a GET / for the SNI). */
  request?: string;
  /** How long to wait for each record (default 5000 ms). */
  timeoutMs?: number;
  /** Called with the socket once connected (tests read ipgate's side by it). */
  onSocket?: (socket: net.Socket) => void;
}

export interface Tls13Result {
  /** The server sent a HelloRetryRequest. */
  hrr: boolean;
  /** A second ClientHello was sent (after the HRR, or pipelined). */
  secondHelloSent: boolean;
  /** A real ServerHello was received. */
  serverHello: boolean;
  /** The certificate the server presented (`CN=...`), null if none arrived. */
  certificateSubject: string | null;
  /** ALPN chosen by the server (EncryptedExtensions), null if none. */
  alpn: string | null;
  /** The handshake completed both ways (server Finished verified, ours sent). */
  handshakeDone: boolean;
  /** The decrypted application data the server sent (the HTTP response). */
  response: string;
  /** An alert the server sent, as [level, description] (in plaintext or encrypted). */
  alert: [number, number] | null;
  /** Why the client stopped early, if it did (the peer closed, a bad message). */
  stopped: string | null;
}

/** Run one TLS 1.3 handshake and HTTP exchange to host:port, reporting what the server presented. */
export async function tls13Handshake(o: Tls13Options): Promise<Tls13Result> {
  const ms = o.timeoutMs ?? 5000;
  const socket = net.connect({ host: o.host ?? '127.0.0.1', port: o.port, localAddress: o.localAddress });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  o.onSocket?.(socket);
  const reader = new RecordReader(socket);
  const res: Tls13Result = {
    hrr: false,
    secondHelloSent: false,
    serverHello: false,
    certificateSubject: null,
    alpn: null,
    handshakeDone: false,
    response: '',
    alert: null,
    stopped: null,
  };
  try {
    await run(o, socket, reader, res, ms);
  } catch (err) {
    res.stopped = (err as Error).message;
  } finally {
    socket.destroy();
  }
  return res;
}

async function run(o: Tls13Options, socket: net.Socket, reader: RecordReader, res: Tls13Result, ms: number): Promise<void> {
  const state: HelloState = { random: crypto.randomBytes(32), sessionId: crypto.randomBytes(32) };
  const shares1 = (o.keyShares ?? ['x25519']).map((g) => new KeyShare(g));
  const ch1 = handshakeMessage(1, helloBody(o, state, shares1, null));
  const second: HelloFields = { ...o, ...o.retry };
  let shares = shares1;
  let transcript: Buffer[] = [ch1];
  let ch2: Buffer | null = null;
  let pipelinedShare: KeyShare | null = null;
  if (o.pipeline === true) {
    pipelinedShare = new KeyShare(o.pipelineGroup ?? 'p256');
    ch2 = handshakeMessage(1, helloBody({ ...second, earlyData: false }, state, [pipelinedShare], null));
    socket.write(Buffer.concat([record(CT_HANDSHAKE, ch1, 0x0301), record(CT_HANDSHAKE, ch2)]));
    res.secondHelloSent = true;
  } else {
    socket.write(record(CT_HANDSHAKE, ch1, 0x0301));
  }

  const plain = new Messages();
  let sh: ServerHelloView | null = null;
  let shMessage: Buffer | null = null;
  // The ServerHello (after at most one HelloRetryRequest), in plaintext records.
  while (sh === null) {
    const r = await reader.next(ms);
    if (r === null) throw new Error('the connection closed before a ServerHello');
    if (r.type === CT_CCS) continue;
    if (r.type === CT_ALERT) {
      res.alert = [r.payload[0]!, r.payload[1]!];
      throw new Error(`alert ${r.payload[1]} before a ServerHello`);
    }
    if (r.type !== CT_HANDSHAKE) throw new Error(`record type ${r.type} before a ServerHello`);
    plain.push(r.payload);
    for (let m = plain.take(); m !== null; m = plain.take()) {
      if (m[0] !== 2) throw new Error(`handshake message ${m[0]} before a ServerHello`);
      const v = parseServerHello(m);
      if (!v.hrr) {
        sh = v;
        shMessage = m;
        break;
      }
      if (res.hrr) throw new Error('a second HelloRetryRequest');
      res.hrr = true;
      // RFC 8446 4.4.1: the transcript restarts with message_hash = Hash(ClientHello1).
      transcript = [Buffer.concat([u8(254), u24(32), sha256(ch1)]), m];
      if (pipelinedShare !== null) {
        shares = [pipelinedShare];
      } else {
        const group = (Object.keys(GROUP_ID) as Group[]).find((g) => GROUP_ID[g] === v.group);
        if (group === undefined) throw new Error(`the HelloRetryRequest asks for group ${v.group}`);
        shares = [new KeyShare(group)];
        ch2 = handshakeMessage(1, helloBody({ ...second, earlyData: false }, state, shares, v.cookie));
        socket.write(Buffer.concat([CCS_RECORD, record(CT_HANDSHAKE, ch2)]));
        res.secondHelloSent = true;
      }
      transcript.push(ch2!);
    }
  }
  res.serverHello = true;
  transcript.push(shMessage!);
  const share = shares.find((s) => GROUP_ID[s.group] === sh!.group);
  if (share === undefined || sh.keyShare === null) throw new Error(`the ServerHello's key share (group ${sh.group}) is not one offered`);

  const hs = extract(deriveSecret(extract(ZEROS, ZEROS), 'derived', Buffer.alloc(0)), share.secret(sh.keyShare));
  const helloHash = Buffer.concat(transcript);
  const cHs = deriveSecret(hs, 'c hs traffic', helloHash);
  const sHs = deriveSecret(hs, 's hs traffic', helloHash);
  const master = extract(deriveSecret(hs, 'derived', Buffer.alloc(0)), ZEROS);
  let serverKeys = new Protection(sHs);
  const enc = new Messages();
  let serverFinished = false;
  while (!serverFinished) {
    const r = await reader.next(ms);
    if (r === null) throw new Error("the connection closed during the server's handshake flight");
    if (r.type === CT_CCS) continue;
    if (r.type === CT_ALERT) {
      res.alert = [r.payload[0]!, r.payload[1]!];
      throw new Error(`alert ${r.payload[1]} in the handshake`);
    }
    if (r.type !== CT_APPLICATION) throw new Error(`record type ${r.type} in the encrypted handshake`);
    const inner = serverKeys.open(r.header, r.payload);
    if (inner.type === CT_ALERT) {
      res.alert = [inner.data[0]!, inner.data[1]!];
      throw new Error(`alert ${inner.data[1]} in the handshake`);
    }
    enc.push(inner.data);
    for (let m = enc.take(); m !== null; m = enc.take()) {
      if (m[0] === 8) res.alpn = readSelectedAlpn(m);
      else if (m[0] === 11) res.certificateSubject = certificateSubject(m);
      else if (m[0] === 20) {
        const expected = hmac(expandLabel(sHs, 'finished', Buffer.alloc(0), 32), sha256(Buffer.concat(transcript)));
        if (!expected.equals(m.subarray(4))) throw new Error('the server Finished does not verify (key schedule mismatch)');
        transcript.push(m);
        serverFinished = true;
        break;
      }
      transcript.push(m);
    }
  }
  const th = Buffer.concat(transcript);
  const cAp = deriveSecret(master, 'c ap traffic', th);
  const sAp = deriveSecret(master, 's ap traffic', th);
  const finished = handshakeMessage(20, hmac(expandLabel(cHs, 'finished', Buffer.alloc(0), 32), sha256(th)));
  const clientKeys = new Protection(cHs);
  const appKeys = new Protection(cAp);
  socket.write(
    Buffer.concat([
      ...(res.hrr ? [] : [CCS_RECORD]),
      clientKeys.seal(CT_HANDSHAKE, finished),
      appKeys.seal(
        CT_APPLICATION,
        Buffer.from(o.request ?? `GET / HTTP/1.1\r\nHost: ${o.sni ?? 'localhost'}\r\nConnection: close\r\n\r\n`),
      ),
    ]),
  );
  res.handshakeDone = true;
  serverKeys = new Protection(sAp);
  for (;;) {
    const r = await reader.next(ms);
    if (r === null) return;
    if (r.type !== CT_APPLICATION) throw new Error(`record type ${r.type} after the handshake`);
    const inner = serverKeys.open(r.header, r.payload);
    if (inner.type === CT_APPLICATION) res.response += inner.data.toString('latin1');
    else if (inner.type === CT_ALERT) {
      if (inner.data[1] !== 0) res.alert = [inner.data[0]!, inner.data[1]!];
      return; // close_notify (0) or another alert
    }
    // CT_HANDSHAKE: NewSessionTicket, ignored.
  }
}

function readSelectedAlpn(m: Buffer): string | null {
  let p = 4 + 2;
  const end = 4 + 2 + m.readUInt16BE(4);
  while (p < end) {
    const type = m.readUInt16BE(p);
    const len = m.readUInt16BE(p + 2);
    if (type === 16) return m.subarray(p + 4 + 3, p + 4 + 3 + m[p + 4 + 2]!).toString('latin1');
    p += 4 + len;
  }
  return null;
}
