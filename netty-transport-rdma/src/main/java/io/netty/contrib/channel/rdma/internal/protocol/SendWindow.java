package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The sender's view of what the peer has room for: receive buffers (one per SEND or WRITE WITH IMMEDIATE,
 * since both consume a posted receive) and bytes of the peer's receive ring (WRITE WITH IMMEDIATE only).
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
    private long ringFree;
    private long ringTail;
    private boolean lastWrapped;

    public SendWindow(int recvCredits, long ringSize) {
        if (recvCredits <= RESERVED_RECV_CREDITS) {
            throw new IllegalArgumentException("recvCredits: " + recvCredits + " (expected: > "
                    + RESERVED_RECV_CREDITS + ')');
        }
        if (ringSize < 0 || ringSize % Immediate.ALIGNMENT != 0) {
            throw new IllegalArgumentException("ringSize: " + ringSize + " (expected: >= 0 and a multiple of "
                    + Immediate.ALIGNMENT + ')');
        }
        this.recvCredits = recvCredits;
        this.ringSize = ringSize;
        this.ringFree = ringSize;
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
     * Reserves ring space for a write of {@code length} bytes.
     *
     * @return the ring offset to write at, or -1 when the ring has no room now; after a successful call
     *         {@link #lastWrapped()} says whether the write skipped the ring's tail
     */
    public long tryReserveRing(int length) {
        long aligned = Immediate.alignedLength(length);
        if (length <= 0 || aligned > ringSize) {
            throw new IllegalArgumentException("length: " + length + " (expected: 1-" + ringSize + ')');
        }
        if (ringTail + aligned <= ringSize) {
            if (ringFree < aligned) {
                return -1;
            }
            long offset = ringTail;
            ringTail += aligned;
            ringFree -= aligned;
            lastWrapped = false;
            return offset;
        }
        long skipped = ringSize - ringTail;
        if (ringFree < skipped + aligned) {
            return -1;
        }
        ringFree -= skipped + aligned;
        ringTail = aligned;
        lastWrapped = true;
        return 0;
    }

    /** The peer replaced its ring (size 0: withdrew it): later writes go to the new one, which is all free. */
    public void switchRing(long newRingSize) {
        if (newRingSize < 0 || newRingSize % Immediate.ALIGNMENT != 0) {
            throw new ProtocolException("new ring of " + newRingSize + " bytes");
        }
        ringSize = newRingSize;
        ringFree = newRingSize;
        ringTail = 0;
        lastWrapped = false;
    }

    public boolean lastWrapped() {
        return lastWrapped;
    }

    /** Credits the peer returned in a message header. */
    public void grant(int recvCredits, long ringBytes) {
        if (ringFree + ringBytes > ringSize) {
            throw new ProtocolException("peer returned " + ringBytes + " ring bytes, but only " + (ringSize - ringFree)
                    + " are in use");
        }
        this.recvCredits += recvCredits;
        this.ringFree += ringBytes;
    }

    public int recvCredits() {
        return recvCredits;
    }

    public long ringFree() {
        return ringFree;
    }

    public long ringSize() {
        return ringSize;
    }

    @Override
    public String toString() {
        return "SendWindow{recvCredits=" + recvCredits + ", ringFree=" + ringFree + ", ringTail=" + ringTail
                + ", ringSize=" + ringSize + '}';
    }
}
