/**
 * The PROXY v2 header of the minimal TCP forwarders (tcp-min.ts, tcp-raw-min.ts): PROXY/TCP4 only,
 * no validation, the least work that produces a header the benchmark's backend accepts.
 */
const SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

/** PROXY v2 PROXY/TCP4 header for `src:srcPort -> dst:dstPort`. */
export function v2(src: string, srcPort: number, dst: string, dstPort: number): Buffer {
  const b = Buffer.allocUnsafe(28);
  SIG.copy(b, 0);
  b[12] = 0x21;
  b[13] = 0x11;
  b.writeUInt16BE(12, 14);
  const s = src.split('.');
  const d = dst.split('.');
  for (let i = 0; i < 4; i++) {
    b[16 + i] = Number(s[i]);
    b[20 + i] = Number(d[i]);
  }
  b.writeUInt16BE(srcPort, 24);
  b.writeUInt16BE(dstPort, 26);
  return b;
}
