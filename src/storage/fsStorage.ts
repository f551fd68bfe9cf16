import type { Readable } from 'node:stream';
import type { Storage, StoredObject } from './storage';

/** Placeholder until the video issue lands the filesystem storage. */
export class FsStorage implements Storage {
  constructor(readonly dir: string) {}
  async put(_key: string, _body: Readable, _contentType: string): Promise<StoredObject> { throw new Error('not implemented'); }
  async head(_key: string): Promise<StoredObject | null> { return null; }
  async get(_key: string): Promise<Readable> { throw new Error('not implemented'); }
  async delete(_key: string): Promise<void> {}
}
