import type { AcceptedNotify, PendingDelivery } from '../store/delivery-store.js';

/** One `notify` part taken in and not yet secured: acknowledged once every request of it is done or stored. */
export interface Entry {
  readonly partition: number;
  readonly notify: AcceptedNotify;
  /** Its requests neither done nor stored yet. */
  readonly open: Set<string>;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** Where a request held in memory is: only in memory, being written, or in the store. */
export interface Tracked {
  readonly delivery: PendingDelivery;
  state: 'memory' | 'persisting' | 'stored';
  /** Done while it was being written: deleted once the write landed. */
  doneWhilePersisting?: boolean;
  /**
   * Perhaps in the store too: found there (written by the partition's last
   * holder, whose write landed late), or its write here failed (it may have
   * landed all the same). Deleted from the store once done.
   */
  storedToo?: boolean;
  /** Its part, until the part is acknowledged. */
  entry?: Entry | undefined;
  /**
   * Read from the store at a takeover: its part may be unrecorded (the last
   * holder stored the requests, not the record), so still in the queue, to
   * be taken in and planned again. Its progress is noted once done.
   */
  taken?: true;
}
