/**
 * The ServerHello reader (src/tls/server-hello.ts): table-driven over annotated hex fixtures
 * (test/fixtures/tls/server-hello-vectors.ts), each delivered whole, one byte per chunk and in
 * random chunks, with the same events; malformed flights are refused with tls_bad_server_hello;
 * random and mutated input never makes it throw (time-boxed, seeded: HRR_FUZZ_SEED replays).
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { HRR_RANDOM, ServerHelloReader, type ServerHelloEvent } from '../../../src/tls/server-hello';
import { prng } from '../../helpers/prng';
import { HRR_RECORD, SERVER_INVALID, SERVER_VALID, SH13_RECORD, type Event } from '../../fixtures/tls/server-hello-vectors';

const SEED = Number(process.env.HRR_FUZZ_SEED ?? Date.now() % 0x7fffffff);

/** Feed `chunks` in order, collecting events as the forwarder does (re-reading after a retry). */
function events(chunks: Buffer[]): { events: Event[]; threw: string | null; reader: ServerHelloReader } {
  const reader = new ServerHelloReader();
  const out: Event[] = [];
  try {
    for (const chunk of chunks) {
      let at = 0;
      for (;;) {
        const e: ServerHelloEvent = reader.read(chunk, at);
        if (e === 'need_more') break;
        out.push(e);
        if (e !== 'hello_retry') return { events: out, threw: null, reader };
        if (reader.at < at || reader.at > chunk.length) throw new Error(`at ${reader.at} outside ${at}..${chunk.length}`);
        at = reader.at;
      }
    }
  } catch (err) {
    return { events: out, threw: String(err), reader };
  }
  return { events: out, threw: null, reader };
}

function cut(bytes: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  let p = 0;
  for (const s of sizes) {
    if (p >= bytes.length) break;
    out.push(bytes.subarray(p, p + s));
    p += s;
  }
  if (p < bytes.length) out.push(bytes.subarray(p));
  return out;
}

const bytewise = (b: Buffer): Buffer[] => [...b].map((x) => Buffer.from([x]));

t.test('the retry constant is SHA-256("HelloRetryRequest") (RFC 8446 4.1.3)', async (t) => {
  t.same(HRR_RANDOM, createHash('sha256').update('HelloRetryRequest').digest());
});

t.test('valid first flights: the same events whole, byte by byte and in random chunks', async (t) => {
  const rand = prng(SEED);
  for (const row of [...SERVER_VALID, ...SERVER_INVALID]) {
    const input = Buffer.from(row.bytes);
    const whole = events([input]);
    t.equal(whole.threw, null, `${row.name}: never throws`);
    t.same(whole.events, row.events, `${row.name}: ${row.events.join(', ') || 'nothing yet'}`);
    t.same(input, row.bytes, `${row.name}: the input is not modified`);
    t.same(events(bytewise(input)).events, row.events, `${row.name}: one byte per read`);
    const sizes = Array.from({ length: 8 }, () => 1 + Math.floor(rand() * 40));
    t.same(events(cut(input, sizes)).events, row.events, `${row.name}: chunks of ${sizes.join(',')} (seed ${SEED})`);
    if (row.events.at(-1) === 'error') {
      t.equal(whole.reader.reason, 'tls_bad_server_hello', `${row.name}: tls_bad_server_hello`);
      t.ok(whole.reader.message.length > 0 && whole.reader.message.length <= 120, `${row.name}: says why (${whole.reader.message})`);
      t.equal(whole.reader.read(SH13_RECORD), 'error', `${row.name}: and stays refused`);
    }
  }
});

t.test('where the reader stops: just past the random, so the caller can read on after a retry', async (t) => {
  const r = new ServerHelloReader();
  const flight = Buffer.concat([HRR_RECORD, SH13_RECORD]);
  t.equal(r.read(flight), 'hello_retry');
  t.equal(r.at, 5 + 4 + 2 + 32, "after the retry's random");
  t.equal(r.retries, 1);
  t.equal(r.read(flight, r.at), 'server_hello');
  t.equal(r.at, HRR_RECORD.length + 5 + 4 + 2 + 32, "after the ServerHello's random");
  t.equal(r.read(Buffer.from('anything')), 'server_hello', 'done: later calls say so without reading');
});

t.test('random and mutated input never throws and never reports an offset outside the chunk', async (t) => {
  const rand = prng(SEED + 1);
  const deadline = Date.now() + 1000;
  let runs = 0;
  let failures = 0;
  const bases = SERVER_VALID.map((v) => v.bytes).filter((b) => b.length > 0);
  while (Date.now() < deadline) {
    let input: Buffer;
    if (rand() < 0.3) {
      input = Buffer.from(Array.from({ length: Math.floor(rand() * 200) }, () => Math.floor(rand() * 256)));
    } else {
      input = Buffer.from(bases[Math.floor(rand() * bases.length)]!);
      for (let k = 1 + Math.floor(rand() * 4); k > 0; k--) input[Math.floor(rand() * input.length)] = Math.floor(rand() * 256);
    }
    const a = events([input]);
    const b = events(bytewise(input));
    if (a.threw !== null || b.threw !== null || JSON.stringify(a.events) !== JSON.stringify(b.events)) {
      if (failures++ < 5) t.fail(`seed ${SEED}: ${input.toString('hex')}: ${a.threw ?? b.threw ?? `${a.events} vs ${b.events}`}`);
    }
    runs++;
  }
  t.equal(failures, 0, `${runs} inputs (seed ${SEED}; replay with HRR_FUZZ_SEED=${SEED})`);
});
