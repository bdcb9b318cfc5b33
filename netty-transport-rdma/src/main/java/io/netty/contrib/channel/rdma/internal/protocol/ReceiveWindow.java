package io.netty.contrib.channel.rdma.internal.protocol;

/**
 * The receiver's side of the receive credits, the mirror of {@link SendWindow}: how many messages the peer may
 * still send (its credits as this side granted them), how many freed receives are owed back to it, and how far
 * its grant may grow. Receive buffers come from a queue shared with other connections, so a grant is memory other
 * connections cannot have: an idle peer holds a small grant ({@code initial}), a peer that keeps running down to
 * its reserve while this side keeps up gets it doubled, up to {@code max}, as long as the shared queue has room
 * ({@link #freed(int)}'s argument).
 *
 * <p>The receiver enforces the grant: a message beyond it is a {@link ProtocolException}. Loop-thread confined.
 */
public final class ReceiveWindow {
    private final int max;
    /** Credits the peer may hold: granted and not yet used, plus those owed to it. */
    private int limit;
    /** Credits the peer holds now, as far as this side has granted them. */
    private int outstanding;
    /** Credits freed (or added by a raise) and not yet sent to the peer. */
    private int owed;

    /**
     * @param initial credits the peer holds when the connection starts (the connect parameters say so)
     * @param max     the most it may ever hold
     */
    public ReceiveWindow(int initial, int max) {
        if (initial <= SendWindow.RESERVED_RECV_CREDITS || max < initial) {
            throw new IllegalArgumentException("initial " + initial + ", max " + max + " (expected: "
                    + SendWindow.RESERVED_RECV_CREDITS + " < initial <= max)");
        }
        this.max = max;
        this.limit = initial;
        this.outstanding = initial;
    }

    /**
     * A message from the peer consumed one of its credits.
     *
     * @throws ProtocolException when the peer had none left
     */
    public void consumed() {
        if (outstanding == 0) {
            throw new ProtocolException("peer sent a message beyond the " + limit + " receive credits it was granted");
        }
        outstanding--;
    }

    /**
     * A message that will not be read (the channel is closing) consumed one of the peer's credits; returns
     * {@code false} if it had none left (so it used a receive posted for someone else).
     */
    public boolean dropped() {
        if (outstanding == 0) {
            return false;
        }
        outstanding--;
        return true;
    }

    /**
     * The receive a message consumed is free again: its credit is owed to the peer. If the peer is down to its
     * reserve while this side keeps up with what it sends, the grant is what limits it: it doubles (up to
     * {@code max}, and as far as {@code room} allows). A peer starved because the reader does not read gets
     * nothing more: that is the backpressure.
     *
     * @param room credits the shared receive queue can still take beyond the grants it holds
     * @return the raise: credits added to the grant, to be committed and posted on the shared receive queue
     *         besides the receive this message frees
     */
    public int freed(int room) {
        owed++;
        if (outstanding <= SendWindow.RESERVED_RECV_CREDITS && limit < max) {
            int raise = Math.min(Math.min(limit, max - limit), room);
            if (raise > 0) {
                limit += raise;
                owed += raise;
                return raise;
            }
        }
        return 0;
    }

    /** Takes the owed credits to send to the peer; returns how many. */
    public int take() {
        int n = Math.min(owed, MessageHeader.MAX_RECV_CREDITS);
        owed -= n;
        outstanding += n;
        return n;
    }

    /**
     * Whether a CREDIT message should carry owed credits now, with no DATA going out to carry them: when half of
     * the grant is owed, or when the peer is down to its reserve (it cannot send data without them).
     */
    public boolean due() {
        return owed >= Math.max(1, limit / 2) || owed > 0 && outstanding <= SendWindow.RESERVED_RECV_CREDITS;
    }

    /**
     * The grant the peer may hold at most now (grows up to {@code max}): the credits it holds, those owed to it,
     * and those of messages not yet freed. What the shared receive queue keeps for this peer.
     */
    public int limit() {
        return limit;
    }

    public int owed() {
        return owed;
    }

    /** Credits the peer holds now. */
    public int outstanding() {
        return outstanding;
    }

    @Override
    public String toString() {
        return "ReceiveWindow{outstanding=" + outstanding + ", owed=" + owed + ", limit=" + limit + ", max=" + max
                + '}';
    }
}
