package io.netty.contrib.channel.rdma;

/**
 * The messages a connection received and has not delivered yet, in arrival order, each by the receive slot it
 * holds: a SEND's payload in its slot, a ring write's bytes in its ring, or the peer's SHUTDOWN. Holding the slot
 * is what makes the peer wait: its credit comes back only when the message is delivered ({@link #remove()}).
 * Every queued message used a credit, so the queue never holds more than the credits granted: its capacity.
 * Parallel arrays, so that queuing allocates nothing; they start small and double up to the capacity as more
 * messages wait at once (an idle connection of many does not pay for 64). Loop-thread confined.
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

    private static final int INITIAL = 8;

    private final int capacity;
    private int[] slots;
    private byte[] kinds;
    private long[] addresses;
    private int[] lengths;
    private long[] ringSeqs;
    private ReceiveRing[] rings;
    private int head;
    private int count;

    ReceivedQueue(int capacity) {
        this.capacity = capacity;
        allocate(Math.min(INITIAL, capacity));
    }

    private void allocate(int size) {
        slots = new int[size];
        kinds = new byte[size];
        addresses = new long[size];
        lengths = new int[size];
        ringSeqs = new long[size];
        rings = new ReceiveRing[size];
    }

    /** Doubles the arrays (up to the capacity), the oldest message first. */
    private void grow() {
        int[] oldSlots = slots;
        byte[] oldKinds = kinds;
        long[] oldAddresses = addresses;
        int[] oldLengths = lengths;
        long[] oldRingSeqs = ringSeqs;
        ReceiveRing[] oldRings = rings;
        allocate(Math.min(capacity, oldSlots.length * 2));
        for (int i = 0; i < count; i++) {
            int from = (head + i) % oldSlots.length;
            slots[i] = oldSlots[from];
            kinds[i] = oldKinds[from];
            addresses[i] = oldAddresses[from];
            lengths[i] = oldLengths[from];
            ringSeqs[i] = oldRingSeqs[from];
            rings[i] = oldRings[from];
        }
        head = 0;
    }

    /**
     * Queues a message; a ring write names its ring and the slab it landed in ({@code ringSeq}; {@code ring} null
     * and {@code ringSeq} -1 otherwise).
     *
     * @throws IllegalStateException when full: more messages than credits granted, which the caller prevents
     */
    void add(int slot, byte kind, long address, int length, long ringSeq, ReceiveRing ring) {
        if (count == slots.length) {
            if (count == capacity) {
                throw new IllegalStateException("more than " + capacity + " messages received and not delivered");
            }
            grow();
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
