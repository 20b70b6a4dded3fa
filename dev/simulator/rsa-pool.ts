/**
 * RSA-2048 keys for gencsr. Generating one takes tens of milliseconds of CPU, so a fleet keeps a
 * few generated ahead (off the event loop, in libuv's thread pool) and, for very large runs,
 * can hand out a fixed set of keys round-robin instead of a fresh key per CSR.
 */
import { generateKeyPair, type KeyObject } from "node:crypto";

export interface RsaKeyPoolOptions {
  /** Keys kept generated ahead (fresh mode) or the fixed set size (reuse mode). Default 2. */
  size?: number;
  /**
   * Hand out `size` keys round-robin: nodes then share private keys (CSRs still carry each node's
   * own CN). Meant for 1,000+ node runs where fresh keys would dominate the run time.
   */
  reuse?: boolean;
}

function generateRsaKey(): Promise<KeyObject> {
  return new Promise((resolve, reject) => {
    generateKeyPair("rsa", { modulusLength: 2048 }, (error, _publicKey, privateKey) => (error ? reject(error) : resolve(privateKey)));
  });
}

export class RsaKeyPool {
  private readonly size: number;
  private readonly reuse: boolean;
  private readonly ready: Promise<KeyObject>[] = [];
  private handedOut = 0;

  constructor(options: RsaKeyPoolOptions = {}) {
    this.size = Math.max(1, options.size ?? 2);
    this.reuse = options.reuse ?? false;
  }

  take(): Promise<KeyObject> {
    if (this.reuse) {
      const index = this.handedOut++ % this.size;
      this.ready[index] ??= generateRsaKey();
      return this.ready[index];
    }
    const key = this.ready.shift() ?? generateRsaKey();
    while (this.ready.length < this.size) this.ready.push(generateRsaKey());
    return key;
  }
}
