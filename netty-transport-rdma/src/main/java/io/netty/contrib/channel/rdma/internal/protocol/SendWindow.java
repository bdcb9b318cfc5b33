package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The sender's view of what the peer has room for: receive buffers (one per SEND or WRITE WITH IMMEDIATE,
 * since both consume a posted receive) and the slabs of the peer's receive ring it returned (WRITE WITH IMMEDIATE
 * only), each with the rkey of its window.
 * Nothing is posted without credit, so the peer never answers with RNR in steady state.
 *
 * <p>One receive credit stays in reserve for {@link MessageHeader#TYPE_CREDIT} messages: when both sides
 * write and neither reads, each can still tell the other what it has freed, so neither waits forever.
 *
 * <p>Loop-thread confined.
 */
public final class SendWindow {
    /** Receive credits only a credit message may use. */
    public static final int RESERVED_RECV_CREDITS = 1;

    private long ringSize;
    private int recvCredits;
    private int slabCount;
    private long slabSize;
    private final int[] rkeys = new int[Immediate.MAX_SLABS];
    /**
     * Slabs the writer may write, a stack: the one returned last is written first, so that while the peer keeps up
     * the same few slabs take the writes (the rest of the ring stays out of the caches).
     */
    private final int[] granted = new int[Immediate.MAX_SLABS];
    private int grantedCount;
    /** The slab being filled, or -1. */
    private int current = -1;
    private long cursor;
    /** Returned slabs keep their rkey (the peer's ring is a PD-wide region without windows). */
    private boolean fixedRkeys;

    public SendWindow(int recvCredits) {
        if (recvCredits <= RESERVED_RECV_CREDITS) {
            throw new IllegalArgumentException("recvCredits: " + recvCredits + " (expected: > "
                    + RESERVED_RECV_CREDITS + ')');
        }
        this.recvCredits = recvCredits;
    }

    /** Takes a receive credit for a DATA, SHUTDOWN or WRITE WITH IMMEDIATE message, if one is free. */
    public boolean tryAcquireMessage() {
        if (recvCredits > RESERVED_RECV_CREDITS) {
            recvCredits--;
            return true;
        }
        return false;
    }

    /** Takes a receive credit for a CREDIT message, which may use the reserve. */
    public boolean tryAcquireCreditMessage() {
        if (recvCredits > 0) {
            recvCredits--;
            return true;
        }
        return false;
    }

    /** Gives back a credit taken by one of the {@code tryAcquire} methods that was then not used. */
    public void releaseUnused() {
        recvCredits++;
    }

    /**
     * Reserves room for a ring write of {@code length} bytes: in the slab being filled while it fits, else at the
     * start of the slab the peer returned last (which leaves the slab being filled).
     *
     * @return the ring offset to write at, or -1 when no slab has room now; after a successful call
     *         {@link #lastSlab()} and {@link #lastRkey()} say where it goes
     */
    public long tryReserveRing(int length) {
        long aligned = Immediate.alignedLength(length);
        if (length <= 0 || aligned > slabSize) {
            throw new IllegalArgumentException("length: " + length + " (expected: 1-" + slabSize + ')');
        }
        if (current >= 0 && cursor + aligned <= slabSize) {
            long offset = current * slabSize + cursor;
            cursor += aligned;
            return offset;
        }
        if (grantedCount == 0) {
            return -1;
        }
        current = granted[--grantedCount];
        cursor = aligned;
        return current * slabSize;
    }

    /**
     * The most bytes {@link #tryReserveRing} would find room for now (a multiple of {@link Immediate#ALIGNMENT}):
     * the rest of the slab being filled, or a whole slab the peer returned; 0 when neither has any.
     */
    public long ringRoom() {
        long rest = current >= 0 ? slabSize - cursor : 0;
        return grantedCount > 0 ? Math.max(rest, slabSize) : rest;
    }

    /** The slab of the last reservation. */
    public int lastSlab() {
        return current;
    }

    /** Whether the peer's slabs have windows of their own (no FIXED_RKEYS): a SEAL may invalidate the last one. */
    public boolean windows() {
        return !fixedRkeys;
    }

    /** The rkey of the slab of the last reservation. */
    public int lastRkey() {
        return rkeys[current];
    }

    /**
     * The writer leaves the slab it is filling (the last ring write posted carries SEAL): its next write goes to
     * the slab returned last. Returns whether it was filling one.
     */
    public boolean seal() {
        if (current < 0) {
            return false;
        }
        current = -1;
        cursor = 0;
        return true;
    }

    /**
     * The peer replaced its ring ({@code slabs} 0: withdrew it): later writes go to the new one, every slab of
     * which is the writer's, under the rkeys given.
     */
    public void switchRing(long newRingSize, int slabs, int[] newRkeys, boolean fixedRkeys) {
        if (slabs < 0 || slabs > Immediate.MAX_SLABS || slabs == 0 && newRingSize != 0
                || slabs != 0 && (newRingSize % slabs != 0 || newRingSize / slabs % Immediate.ALIGNMENT != 0)) {
            throw new ProtocolException("new ring of " + newRingSize + " bytes in " + slabs + " slabs");
        }
        ringSize = newRingSize;
        slabCount = slabs;
        slabSize = slabs == 0 ? 0 : newRingSize / slabs;
        System.arraycopy(newRkeys, 0, rkeys, 0, slabs);
        this.fixedRkeys = fixedRkeys;
        current = -1;
        cursor = 0;
        grantedCount = slabs;
        for (int k = 0; k < slabs; k++) {
            granted[k] = slabs - 1 - k;
        }
    }

    /** Bytes of the largest ring write: a slab; 0 while the peer offers no ring. */
    public long maxRingWrite() {
        return slabSize;
    }

    /**
     * Credits the peer returned in a message header: receive credits, and slabs (bit k for slab k), each bound
     * again under the next rkey of its window ({@code ibv_inc_rkey}).
     */
    public void grant(int recvCredits, int returnedSlabs) {
        if (returnedSlabs != 0) {
            if (slabCount < Integer.SIZE && returnedSlabs >>> slabCount != 0) {
                throw new ProtocolException("peer returned slabs 0x" + Integer.toHexString(returnedSlabs)
                        + " of a ring of " + slabCount + " slabs");
            }
            for (int m = returnedSlabs; m != 0; m &= m - 1) {
                int slab = Integer.numberOfTrailingZeros(m);
                if (slab == current || isGranted(slab)) {
                    throw new ProtocolException("peer returned slab " + slab + ", which the writer has");
                }
            }
            for (int m = returnedSlabs; m != 0; m &= m - 1) {
                int slab = Integer.numberOfTrailingZeros(m);
                if (!fixedRkeys) {
                    rkeys[slab] = nextRkey(rkeys[slab]);
                }
                granted[grantedCount++] = slab;
            }
        }
        this.recvCredits += recvCredits;
    }

    private boolean isGranted(int slab) {
        for (int i = 0; i < grantedCount; i++) {
            if (granted[i] == slab) {
                return true;
            }
        }
        return false;
    }

    /** {@code ibv_inc_rkey}: the same window, the next 8-bit key; what the peer's window is bound with next. */
    public static int nextRkey(int rkey) {
        return (rkey & ~0xFF) | ((rkey + 1) & 0xFF);
    }

    public int recvCredits() {
        return recvCredits;
    }

    /** Slabs the writer may write, not counting the one it is filling. */
    public int grantedSlabs() {
        return grantedCount;
    }

    public long ringSize() {
        return ringSize;
    }

    @Override
    public String toString() {
        return "SendWindow{recvCredits=" + recvCredits + ", ringSize=" + ringSize + ", slabs=" + slabCount
                + ", granted=" + grantedCount + ", current=" + current + ", cursor=" + cursor + '}';
    }
}
