/**
 * Test certificates made with the `openssl` CLI into a temp dir: a CA, server certificates (RSA
 * 2048 and ECDSA P-256, exact and wildcard names) signed by it, and client certificates (one
 * from the CA, one from another CA). Nothing is checked in: every run makes its own.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tmpDir } from './ipgate';

export type KeyKind = 'rsa' | 'ec';

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function keyArgs(kind: KeyKind): string[] {
  return kind === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
}

export class CertDir {
  readonly dir = tmpDir('ipgate-certs-');

  constructor() {
    this.ca('ca');
  }

  file(name: string): string {
    return path.join(this.dir, name);
  }

  /** A self-signed CA: NAME.crt, NAME.key. */
  ca(name: string): void {
    openssl(
      [
        'req',
        '-x509',
        ...keyArgs('ec'),
        '-nodes',
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.crt`,
        '-days',
        '3',
        '-subj',
        `/CN=${name} test CA`,
      ],
      this.dir,
    );
  }

  /**
   * A certificate signed by `ca`: NAME.crt (leaf, then the CA when `chain`), NAME.key. `dns`:
   * subjectAltName DNS names (none: only the CN). `client`: extendedKeyUsage clientAuth.
   */
  issue(
    name: string,
    o: { cn: string; dns?: string[]; kind?: KeyKind; ca?: string; client?: boolean; chain?: boolean; days?: number },
  ): { cert: string; key: string } {
    const ca = o.ca ?? 'ca';
    const ext = path.join(this.dir, `${name}.ext`);
    const lines = [o.client === true ? 'extendedKeyUsage=clientAuth' : 'extendedKeyUsage=serverAuth'];
    if (o.dns !== undefined && o.dns.length > 0) lines.push(`subjectAltName=${o.dns.map((d) => `DNS:${d}`).join(',')}`);
    fs.writeFileSync(ext, `${lines.join('\n')}\n`);
    openssl(
      ['req', '-new', ...keyArgs(o.kind ?? 'ec'), '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${o.cn}`],
      this.dir,
    );
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${ca}.crt`,
        '-CAkey',
        `${ca}.key`,
        '-CAcreateserial',
        '-days',
        String(o.days ?? 2),
        '-extfile',
        ext,
        '-out',
        `${name}.leaf`,
      ],
      this.dir,
    );
    const leaf = fs.readFileSync(this.file(`${name}.leaf`));
    fs.writeFileSync(this.file(`${name}.crt`), o.chain === false ? leaf : Buffer.concat([leaf, fs.readFileSync(this.file(`${ca}.crt`))]));
    return { cert: this.file(`${name}.crt`), key: this.file(`${name}.key`) };
  }

  /**
   * A Kubernetes Secret volume's layout for `name`: DIR/tls.crt -> ..data/tls.crt, ..data ->
   * ..vN/, and `swap` publishes a new version the way the kubelet does (a new directory, then one
   * rename of the `..data` symlink).
   */
  secretVolume(name: string): { dir: string; cert: string; key: string; swap: (certPem: Buffer, keyPem: Buffer) => void } {
    const dir = path.join(this.dir, `${name}-volume`);
    fs.mkdirSync(dir);
    let version = 0;
    const swap = (certPem: Buffer, keyPem: Buffer): void => {
      version++;
      const v = `..v${version}`;
      fs.mkdirSync(path.join(dir, v));
      fs.writeFileSync(path.join(dir, v, 'tls.crt'), certPem);
      fs.writeFileSync(path.join(dir, v, 'tls.key'), keyPem);
      fs.symlinkSync(v, path.join(dir, '..data_tmp'));
      fs.renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
      if (version === 1) {
        fs.symlinkSync('..data/tls.crt', path.join(dir, 'tls.crt'));
        fs.symlinkSync('..data/tls.key', path.join(dir, 'tls.key'));
      }
    };
    return { dir, cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key'), swap };
  }

  read(name: string): Buffer {
    return fs.readFileSync(this.file(name));
  }
}
