/**
 * The byte gatherer of the PROXY and ClientHello stages (src/connection/gather.ts), on its own, over
 * real loopback connections, on a net.Socket (accepted with pauseOnConnect, as HTTP listeners
 * accept) and on a RawSocket (a libuv handle, as TCP listeners run). The stage here answers once
 * it has a line; each row scripts what the peer does and says every call the stage must see:
 * split reads, bytes from an earlier stage, timeout, FIN, a close before any answer, and that the
 * answer comes once, with the socket paused and nothing of the gatherer left behind (handlers,
 * timer).
 */
import net from 'node:net';
import t, { type Test } from 'tap';
import { Connection } from '../../src/connection/connection';
import { gather, type GatherStage } from '../../src/connection/gather';
import { RawSocket, rawSocketsAvailable } from '../../src/transport/raw-socket';
import { waitFor } from '../helpers/net';

type Kind = 'net.Socket' | 'RawSocket';
const KINDS: readonly Kind[] = ['net.Socket', 'RawSocket'];

interface Answer {
  result: string;
  /** Everything gathered, as handed to the stage. */
  buf: string;
  /** Whether the socket was paused when the answer came. */
  paused: boolean;
  /** Whether the gatherer's data and end handlers were gone when the answer came. */
  detached: boolean;
}

/** Answers `line <text>` at the first newline; records every call. */
class LineStage implements GatherStage<string> {
  readonly decided: string[] = [];
  readonly answers: Answer[] = [];
  /** `handlers` before gathering. */
  private readonly before: string;
  constructor(
    readonly timeoutMs: number,
    conn: Connection,
  ) {
    this.before = handlers(conn);
  }

  decide(buf: Buffer): string | null {
    this.decided.push(buf.toString('latin1'));
    const nl = buf.indexOf(0x0a);
    return nl < 0 ? null : `line ${buf.subarray(0, nl).toString('latin1')}`;
  }

  timedOut(buf: Buffer): string {
    return `timed out after ${buf.length} bytes`;
  }

  ended(buf: Buffer): string {
    return `ended after ${buf.length} bytes`;
  }

  gathered(conn: Connection, result: string, buf: Buffer): void {
    this.answers.push({ result, buf: buf.toString('latin1'), paused: conn.socket.isPaused(), detached: handlers(conn) === this.before });
  }
}

/** The socket's data and end handlers (net.Socket has an 'end' listener of its own). */
function handlers(conn: Connection): string {
  const s = conn.socket;
  if (s instanceof RawSocket) return `data ${s.onData !== null} end ${s.onEnd !== null}`;
  return `data ${s.listenerCount('data')} end ${s.listenerCount('end')}`;
}

/** Active (ref'd) timers: the gatherer's is one of them while it waits. */
function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

interface Pair {
  conn: Connection;
  /** The other end, which the test writes to, ends or resets. */
  peer: net.Socket;
  /** Resolves once the gathering side is closed. */
  closed: Promise<void>;
}

/**
 * A connection of `kind` on the gathering side, paused and unread, and its peer. net.Socket: the
 * accepted side of a pauseOnConnect server (the peer is the client). RawSocket: a handle that
 * connected out (the peer is the accepted side).
 */
async function pair(t: Test, kind: Kind): Promise<Pair> {
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: kind === 'net.Socket' });
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  let gathering: net.Socket | RawSocket;
  let peer: net.Socket;
  if (kind === 'net.Socket') {
    peer = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.7' });
    gathering = await accepted;
  } else {
    gathering = await new Promise<RawSocket>((resolve, reject) => {
      const s = RawSocket.connect('127.0.0.1', port, 4, (err) => (err === null ? resolve(s) : reject(new Error(err))));
    });
    peer = await accepted;
  }
  peer.on('error', () => undefined);
  const closed =
    gathering instanceof RawSocket
      ? new Promise<void>((r) => gathering.onClose(r))
      : new Promise<void>((r) => gathering.once('close', () => r()));
  if (!(gathering instanceof RawSocket)) gathering.on('error', () => undefined);
  t.teardown(() => {
    gathering.destroy();
    peer.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { conn: new Connection(1, 'gather-test', gathering, '127.0.0.7', 0, '127.0.0.1', port), peer, closed };
}

interface Row {
  what: string;
  timeoutMs: number;
  /** Bytes an earlier stage read past its own. */
  first?: string;
  /** Written before gathering starts (they wait in the kernel: the socket is paused). */
  before?: string;
  /** What the peer does once gathering started. */
  peer(p: Pair, stage: LineStage): Promise<void>;
  decided: string[];
  /** The answers, in order (at most one). */
  answers: string[];
  /** The bytes handed with the answer. */
  buf?: string;
}

/** Write each piece only once the stage has seen the one before: one read each. */
async function inReads(p: Pair, stage: LineStage, pieces: string[]): Promise<void> {
  const seen = stage.decided.length;
  for (const [i, piece] of pieces.entries()) {
    p.peer.write(piece);
    await waitFor(() => stage.decided.length === seen + i + 1, 10_000, `read ${i + 1}`);
  }
}

const LONG = 30_000;
const ROWS: Row[] = [
  {
    what: 'a line split over three reads, with payload after it in the last',
    timeoutMs: LONG,
    peer: (p, s) => inReads(p, s, ['ab', 'cd', 'e\npayload']),
    decided: ['ab', 'abcd', 'abcde\npayload'],
    answers: ['line abcde'],
    buf: 'abcde\npayload',
  },
  {
    what: 'bytes from the earlier stage that already decide: answered before any read',
    timeoutMs: LONG,
    first: 'x\nrest',
    peer: async () => undefined,
    decided: ['x\nrest'],
    answers: ['line x'],
    buf: 'x\nrest',
  },
  {
    what: 'bytes from the earlier stage completed by a read',
    timeoutMs: LONG,
    first: 'ab',
    peer: (p, s) => inReads(p, s, ['c\n']),
    decided: ['ab', 'abc\n'],
    answers: ['line abc'],
    buf: 'abc\n',
  },
  {
    what: 'the time runs out with part of a line',
    timeoutMs: 300,
    before: 'ab',
    peer: async () => undefined,
    decided: ['ab'],
    answers: ['timed out after 2 bytes'],
    buf: 'ab',
  },
  {
    what: 'the time runs out with nothing sent',
    timeoutMs: 50,
    peer: async () => undefined,
    decided: [],
    answers: ['timed out after 0 bytes'],
    buf: '',
  },
  {
    what: 'the peer ends (FIN) with part of a line',
    timeoutMs: LONG,
    peer: async (p) => void p.peer.end('ab'),
    decided: ['ab'],
    answers: ['ended after 2 bytes'],
    buf: 'ab',
  },
  {
    what: 'the peer ends (FIN) with nothing sent',
    timeoutMs: LONG,
    peer: async (p) => void p.peer.end(),
    decided: [],
    answers: ['ended after 0 bytes'],
    buf: '',
  },
  {
    what: 'a line and the FIN together: one answer, the line',
    timeoutMs: LONG,
    peer: async (p) => void p.peer.end('x\n'),
    decided: ['x\n'],
    answers: ['line x'],
    buf: 'x\n',
  },
  {
    what: "the peer resets before a line: no answer, the close path is the listener's",
    timeoutMs: LONG,
    peer: async (p, s) => {
      await inReads(p, s, ['ab']);
      p.peer.resetAndDestroy();
      await p.closed;
    },
    decided: ['ab'],
    answers: [],
  },
  {
    what: 'closed on this side before a line (the listener closes it): no answer',
    timeoutMs: LONG,
    peer: async (p, s) => {
      await inReads(p, s, ['ab']);
      p.conn.socket.destroy();
      await p.closed;
    },
    decided: ['ab'],
    answers: [],
  },
];

t.test('RawSockets can be made on this Node (else the RawSocket rows cannot run)', async (t) => {
  t.ok(rawSocketsAvailable, `tcp_wrap / stream_wrap bindings usable on ${process.version}`);
});

for (const kind of KINDS) {
  for (const row of ROWS) {
    t.test(`${kind}: ${row.what}`, { skip: kind === 'RawSocket' && !rawSocketsAvailable }, async (t) => {
      const p = await pair(t, kind);
      if (row.before !== undefined) {
        p.peer.write(row.before);
        // The bytes are in the gathering side's receive queue once the peer's write completed.
        await waitFor(() => p.peer.writableLength === 0, 10_000, 'written');
      }
      const stage = new LineStage(row.timeoutMs, p.conn);
      const timersBefore = timers();
      gather(p.conn, Buffer.from(row.first ?? '', 'latin1'), stage);
      await row.peer(p, stage);
      await waitFor(() => stage.answers.length >= row.answers.length, 10_000, 'the answer');

      t.same(stage.decided, row.decided, 'decide saw everything gathered, read by read');
      t.same(
        stage.answers.map((a) => a.result),
        row.answers,
        'the answers',
      );
      if (row.answers.length > 0) {
        const a = stage.answers[0]!;
        t.equal(a.buf, row.buf, 'the bytes handed with the answer');
        t.ok(a.paused, 'the socket was paused before the answer');
        t.ok(a.detached, 'the data and end handlers were gone before the answer');
        // What the next stage would do: read on, then close. Neither reaches the stage again.
        p.peer.end('more\n');
        p.conn.socket.resume();
        p.conn.socket.destroy();
        await p.closed;
      }
      t.equal(timers(), timersBefore, 'the timer is gone (it ran, or was cleared)');
      t.same(
        stage.answers.map((a) => a.result),
        row.answers,
        'still the same answers after the close: exactly once',
      );
    });
  }
}
