package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The receiver's side of the ring: where each incoming write lies, and which ring bytes may be returned to the
 * writer as credit. Writes land in order but their buffers are released in any order (a reader may hold an
 * early slice and free a later one), while ring space can only be handed back in order: a write's space is
 * returned once it and every write before it are released.
 *
 * <p>Loop-thread confined. There is room for {@code capacity} outstanding (unreleased) writes at first, and more
 * when a reader holds more: a write's receive credit comes back once its completion is consumed, its ring bytes
 * only once it is released. The ring bounds them: an outstanding write holds at least {@link Immediate#ALIGNMENT}
 * bytes, so more than {@code ringSize / ALIGNMENT} of them is a protocol violation.
 */
public final class RingReleases {
    private final long ringSize;
    private final long maxOutstanding;
    private long[] spans;            // aligned length + skipped tail of each outstanding write
    private boolean[] released;
    private int mask;
    private long head;               // sequence of the oldest outstanding write
    private long next;               // sequence the next write gets
    private long position;           // ring offset the next write without WRAP lands at
    private long owed;               // ring bytes released in order and not yet returned
    private long pinned;             // ring bytes of outstanding writes (not yet returnable)
    private long lastOffset;

    public RingReleases(long ringSize, int capacity) {
        if (ringSize <= 0 || ringSize % Immediate.ALIGNMENT != 0) {
            throw new IllegalArgumentException("ringSize: " + ringSize + " (expected: > 0 and a multiple of "
                    + Immediate.ALIGNMENT + ')');
        }
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity: " + capacity + " (expected: > 0)");
        }
        int size = Integer.highestOneBit(capacity - 1 | 1) << 1;
        this.ringSize = ringSize;
        this.maxOutstanding = ringSize / Immediate.ALIGNMENT;
        this.spans = new long[size];
        this.released = new boolean[size];
        this.mask = size - 1;
    }

    /**
     * Accounts an incoming write announced by {@code immediate}.
     *
     * @return the write's sequence number, to pass to {@link #release(long)}; {@link #lastOffset()} is where its
     *         bytes lie
     * @throws ProtocolException when the write does not fit where the protocol says it lands
     */
    public long arrive(int immediate) {
        int length = Immediate.length(immediate);
        if (length == 0) {
            throw new ProtocolException("ring write of length 0");
        }
        if (next - head > mask) {
            if (next - head >= maxOutstanding) {
                throw new ProtocolException("peer has more than " + maxOutstanding
                        + " ring writes outstanding: more than its " + ringSize + "-byte ring can hold");
            }
            grow();
        }
        long aligned = Immediate.alignedLength(length);
        long skipped = 0;
        long offset = position;
        if (Immediate.wrap(immediate)) {
            skipped = ringSize - position;
            offset = 0;
        }
        if (offset + aligned > ringSize) {
            throw new ProtocolException("ring write of " + length + " bytes at offset " + offset
                    + " overruns the " + ringSize + "-byte ring");
        }
        if (pinned + owed + skipped + aligned > ringSize) {
            // The writer had no credit for it: it lands on bytes not yet released (or released but not returned).
            throw new ProtocolException("ring write of " + length + " bytes at offset " + offset
                    + " lands on ring space not yet released: " + pinned + " bytes held and " + owed
                    + " not yet returned of " + ringSize);
        }
        int slot = (int) next & mask;
        spans[slot] = skipped + aligned;
        pinned += skipped + aligned;
        released[slot] = false;
        position = offset + aligned;
        lastOffset = offset;
        return next++;
    }

    /** Doubles the room for outstanding writes (a reader holds more than there was room for). */
    private void grow() {
        int size = spans.length * 2;
        long[] newSpans = new long[size];
        boolean[] newReleased = new boolean[size];
        for (long s = head; s < next; s++) {
            newSpans[(int) s & (size - 1)] = spans[(int) s & mask];
            newReleased[(int) s & (size - 1)] = released[(int) s & mask];
        }
        spans = newSpans;
        released = newReleased;
        mask = size - 1;
    }

    public long lastOffset() {
        return lastOffset;
    }

    /** Ring bytes an outstanding write holds: its aligned length and the tail it skipped. */
    public long span(long sequence) {
        if (sequence < head || sequence >= next) {
            throw new IllegalStateException("ring write " + sequence + " is not outstanding");
        }
        return spans[(int) sequence & mask];
    }

    /** Marks a write's bytes as no longer needed; returns ring space that became free in order. */
    public void release(long sequence) {
        if (sequence < head || sequence >= next || released[(int) sequence & mask]) {
            throw new IllegalStateException("ring write " + sequence + " is not outstanding");
        }
        released[(int) sequence & mask] = true;
        while (head < next && released[(int) head & mask]) {
            owed += spans[(int) head & mask];
            pinned -= spans[(int) head & mask];
            head++;
        }
    }

    /** Ring bytes to return to the writer now; resets the count. */
    public long takeOwed() {
        long result = owed;
        owed = 0;
        return result;
    }

    public long owed() {
        return owed;
    }

    /** Ring bytes that cannot go back to the writer yet: outstanding writes, and whatever they skipped. */
    public long pinned() {
        return pinned;
    }

    public int outstanding() {
        return (int) (next - head);
    }

    /** Ring bytes held by writes not yet released (with the tails they skipped). */
    public long occupancy() {
        long total = 0;
        for (long s = head; s < next; s++) {
            total += spans[(int) s & mask];
        }
        return total + owed;
    }
}
