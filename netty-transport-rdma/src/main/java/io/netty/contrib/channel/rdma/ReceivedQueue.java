package io.netty.contrib.channel.rdma;

/**
 * The messages a connection received and has not delivered yet, in arrival order, each by the receive slot it
 * holds: a SEND's payload in its slot, a ring write's bytes in its ring, or the peer's SHUTDOWN. Holding the slot
 * is what makes the peer wait: its credit comes back only when the message is delivered ({@link #remove()}).
 * Every queued message used a credit, so the queue never holds more than the credits granted: its capacity.
 * Parallel arrays, so that queuing allocates nothing. Loop-thread confined.
 */
final class ReceivedQueue {
    /** A SEND's payload, in its receive slot. */
    static final byte DATA = 1;
    /** A ring write, handed over whole (as a copy, or as a buffer over the ring). */
    static final byte RING = 2;
    /** The peer's SHUTDOWN: nothing comes after it. */
    static final byte SHUTDOWN = 3;
    /** A ring write being copied out in parts: it can no longer be handed over as a buffer over the ring. */
    static final byte RING_COPY = 4;

    private final int[] slots;
    private final byte[] kinds;
    private final long[] addresses;
    private final int[] lengths;
    private final long[] ringSeqs;
    private final ReceiveRing[] rings;
    private int head;
    private int count;

    ReceivedQueue(int capacity) {
        slots = new int[capacity];
        kinds = new byte[capacity];
        addresses = new long[capacity];
        lengths = new int[capacity];
        ringSeqs = new long[capacity];
        rings = new ReceiveRing[capacity];
    }

    /**
     * Queues a message; a ring write names its ring and its sequence number there ({@code ring} null and
     * {@code ringSeq} -1 otherwise).
     *
     * @throws IllegalStateException when full: more messages than credits granted, which the caller prevents
     */
    void add(int slot, byte kind, long address, int length, long ringSeq, ReceiveRing ring) {
        if (count == slots.length) {
            throw new IllegalStateException("more than " + slots.length + " messages received and not delivered");
        }
        int at = (head + count++) % slots.length;
        slots[at] = slot;
        kinds[at] = kind;
        addresses[at] = address;
        lengths[at] = length;
        ringSeqs[at] = ringSeq;
        rings[at] = ring;
    }

    boolean isEmpty() {
        return count == 0;
    }

    int size() {
        return count;
    }

    /** The receive slot of the oldest message. */
    int slot() {
        return slots[head];
    }

    byte kind() {
        return kinds[head];
    }

    /** Where the oldest message's bytes not yet delivered begin. */
    long address() {
        return addresses[head];
    }

    /** The oldest message's bytes not yet delivered. */
    int length() {
        return lengths[head];
    }

    long ringSeq() {
        return ringSeqs[head];
    }

    /** The ring the oldest message landed in; null for a SEND or SHUTDOWN. */
    ReceiveRing ring() {
        return rings[head];
    }

    /** The reader took the first {@code n} bytes of the oldest message: the rest stays for the next read. */
    void taken(int n) {
        if (n < 0 || n > lengths[head]) {
            throw new IllegalArgumentException("took " + n + " of " + lengths[head] + " bytes");
        }
        addresses[head] += n;
        lengths[head] -= n;
        if (kinds[head] == RING && lengths[head] > 0) {
            kinds[head] = RING_COPY;
        }
    }

    /** Drops the oldest message (the caller frees its slot and its ring space). */
    void remove() {
        rings[head] = null;
        head = (head + 1) % slots.length;
        count--;
    }
}
