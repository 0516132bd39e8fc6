/**
 * File store (`store.type: file`, the default): one JSON document (document.ts) on local disk.
 *
 * Durability: a write goes to a temp file in the same directory (rename is atomic only within one
 * file system), which is fsynced, renamed over the document, and then the directory is fsynced so the
 * rename itself survives a power cut. Only then is the write acknowledged. A crash at any moment
 * leaves either the old document or the new one, never a mix; a temp file left behind is removed at
 * the next start.
 *
 * External edits: fs.watch on the directory (editors replace the file by rename, which a watch on
 * the file itself would lose) plus a periodic stat as a fallback (network file systems, container
 * bind mounts where inotify is silent). A changed document is parsed and validated whole; a corrupt
 * or invalid one is refused with one error log line per distinct content, and the last good lists
 * stay in force. It is not rewritten either: the operator's file is theirs to fix.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { BaseStore } from './base-store';
import { parseDocument, seedList, serializeDocument } from './document';
import { StoreError, StoreLoadError, type StoredList, type StoreSnapshot } from './store';

interface FileStoreOptions {
  path: string;
  logger: Logger;
  /** Periodic stat of the file, in case fs.watch misses an edit. Default 2000. */
  pollIntervalMs?: number;
}

/** A document larger than this is refused unread: a runaway writer must not exhaust memory. */
const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;
/** fs.watch fires several events for one save (truncate, write, rename): settle first. */
const WATCH_SETTLE_MS = 25;

interface FileId {
  ino: number;
  size: number;
  mtimeMs: number;
}

export class FileStore extends BaseStore {
  readonly kind = 'file';
  readonly location: string;
  private readonly dir: string;
  private readonly base: string;
  private readonly log: Logger;
  private readonly pollIntervalMs: number;
  /** The document's bytes as last written or accepted: an event that finds these changed nothing. */
  private lastText: string | null = null;
  private lastId: FileId | null = null;
  /** The content last refused, so a bad file is logged once, not on every poll. */
  private refusedText: string | null = null;
  private watcher: fs.FSWatcher | null = null;
  private poller: NodeJS.Timeout | null = null;
  private settle: NodeJS.Timeout | null = null;
  private tmpCounter = 0;
  private closed = false;

  constructor(opts: FileStoreOptions) {
    super();
    this.location = path.resolve(opts.path);
    this.dir = path.dirname(this.location);
    this.base = path.basename(this.location);
    this.log = opts.logger.child({ store: 'file', path: this.location });
    this.pollIntervalMs = opts.pollIntervalMs ?? 2000;
  }

  async load(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<StoreSnapshot> {
    await fsp.mkdir(this.dir, { recursive: true });
    await this.removeStaleTemps();
    let text: string | null;
    try {
      text = await this.read();
    } catch (err) {
      throw new StoreLoadError(`allowlist store ${this.location}: ${(err as Error).message}`, { cause: err });
    }
    const lists = new Map<string, StoredList>();
    const added: string[] = [];
    if (text !== null) {
      const parsed = parseDocument(text);
      if (!parsed.ok) {
        throw new StoreLoadError(
          `allowlist store ${this.location} is refused: ${parsed.reason} ` +
            '(fix the file or move it away to seed from the config; ipgate never overwrites it)',
        );
      }
      for (const [name, list] of parsed.lists) lists.set(name, list);
      this.lastText = text;
    }
    for (const [name, entries] of seed) {
      if (lists.has(name)) continue;
      lists.set(name, seedList(name, entries));
      added.push(name);
    }
    this.snapshot = { lists };
    if (added.length > 0) {
      await this.persist(this.snapshot);
      this.log.info(
        { lists: added, created: text === null },
        text === null
          ? 'allowlist store created from the config'
          : 'allowlist store: lists named in the config but missing from the store were added',
      );
    } else {
      this.lastId = await this.statId();
    }
    this.startWatching();
    return this.snapshot;
  }

  /** Already inside the write queue: check directly (checkNow would wait for itself). */
  protected override refresh(): Promise<void> {
    return this.check();
  }

  protected async persist(next: StoreSnapshot): Promise<void> {
    if (this.closed) throw new StoreError('ERR_STORE_CLOSED', 'the store is closed');
    const text = serializeDocument(next);
    const tmp = path.join(this.dir, `.${this.base}.tmp-${process.pid}-${++this.tmpCounter}`);
    try {
      const fh = await fsp.open(tmp, 'wx', 0o644);
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fsp.rename(tmp, this.location);
      await this.syncDir();
    } catch (err) {
      await fsp.unlink(tmp).catch(() => undefined);
      throw new StoreError('ERR_STORE_WRITE', `cannot write the allowlist store ${this.location}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    this.lastText = text;
    this.lastId = await this.statId();
  }

  override async close(): Promise<void> {
    this.closed = true;
    this.watcher?.close();
    this.watcher = null;
    if (this.poller) clearInterval(this.poller);
    if (this.settle) clearTimeout(this.settle);
    this.poller = null;
    this.settle = null;
    await super.close();
  }

  /** Look at the file now (tests, and before every write). */
  checkNow(): Promise<void> {
    return this.serialise(() => this.check());
  }

  private startWatching(): void {
    try {
      this.watcher = fs.watch(this.dir, { persistent: false }, (_event, filename) => {
        if (filename !== null && filename !== this.base) return;
        if (this.settle) clearTimeout(this.settle);
        this.settle = setTimeout(() => {
          this.settle = null;
          void this.checkNow();
        }, WATCH_SETTLE_MS);
        this.settle.unref();
      });
      this.watcher.on('error', (err) =>
        this.log.warn({ err: err.message }, 'allowlist store: directory watch failed; relying on the periodic check'),
      );
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'allowlist store: cannot watch the directory; relying on the periodic check');
    }
    this.poller = setInterval(() => {
      void this.statId().then((id) => {
        if (!sameId(id, this.lastId)) void this.checkNow();
      });
    }, this.pollIntervalMs);
    this.poller.unref();
  }

  /** Compare the file with the last good content; apply a valid change, refuse an invalid one. */
  private async check(): Promise<void> {
    if (this.closed) return;
    let text: string | null;
    try {
      text = await this.read();
    } catch (err) {
      this.refuse(`cannot read: ${(err as Error).message}`, null);
      return;
    }
    const id = await this.statId();
    if (text === this.lastText) {
      this.lastId = id;
      this.clearRefusal();
      return;
    }
    if (text === null) {
      this.lastId = id;
      this.refuse('the file was removed; the next change through the admin API writes it again', null);
      return;
    }
    if (text === this.refusedText) {
      this.lastId = id;
      return;
    }
    const parsed = parseDocument(text);
    if (!parsed.ok) {
      this.lastId = id;
      this.refuse(parsed.reason, text);
      return;
    }
    const dropped = [...this.snapshot.lists.keys()].filter((n) => !parsed.lists.has(n));
    if (dropped.length > 0) {
      this.lastId = id;
      this.refuse(`list(s) ${dropped.join(', ')} missing: a list cannot be removed by editing the file (empty its entries instead)`, text);
      return;
    }
    this.lastText = text;
    this.lastId = id;
    this.clearRefusal();
    this.snapshot = { lists: parsed.lists };
    this.emitExternal({ snapshot: this.snapshot, source: 'file edit' });
  }

  private refuse(reason: string, text: string | null): void {
    this.refusedText = text;
    if (this.refusal?.reason === reason) return;
    this.refusal = { reason, at: Date.now() };
    this.log.error({ reason }, 'allowlist store file refused; the last good lists stay in force');
  }

  private clearRefusal(): void {
    if (this.refusal) this.log.info('allowlist store file is valid again');
    this.refusal = null;
    this.refusedText = null;
  }

  /** The document's text, or null when there is none. */
  private async read(): Promise<string | null> {
    let fh: fsp.FileHandle;
    try {
      fh = await fsp.open(this.location, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    try {
      const st = await fh.stat();
      if (st.size > MAX_DOCUMENT_BYTES) throw new Error(`larger than ${MAX_DOCUMENT_BYTES} bytes (${st.size})`);
      return await fh.readFile('utf8');
    } finally {
      await fh.close();
    }
  }

  private async statId(): Promise<FileId | null> {
    try {
      const st = await fsp.stat(this.location);
      return { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
    } catch {
      return null;
    }
  }

  private async syncDir(): Promise<void> {
    // Some platforms cannot open a directory for fsync (EISDIR/EPERM); the rename is still atomic.
    let dh: fsp.FileHandle | null = null;
    try {
      dh = await fsp.open(this.dir, 'r');
      await dh.sync();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL') throw err;
    } finally {
      await dh?.close();
    }
  }

  private async removeStaleTemps(): Promise<void> {
    const prefix = `.${this.base}.tmp-`;
    for (const name of await fsp.readdir(this.dir)) {
      if (!name.startsWith(prefix)) continue;
      await fsp.unlink(path.join(this.dir, name)).catch(() => undefined);
      this.log.info({ file: name }, 'allowlist store: removed a temp file left by an interrupted write');
    }
  }
}

function sameId(a: FileId | null, b: FileId | null): boolean {
  if (a === null || b === null) return a === b;
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}
