package io.netty.contrib.channel.rdma.internal.protocol;

/** A peer broke the protocol of docs/PROTOCOL.md: the connection cannot go on. */
public final class ProtocolException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int rejectReason;

    public ProtocolException(String message) {
        this(message, RejectReason.REASON_INVALID_PARAMETERS);
    }

    /** @param rejectReason what a server answers a connect request that broke the protocol this way */
    public ProtocolException(String message, int rejectReason) {
        super(message);
        this.rejectReason = rejectReason;
    }

    /** The {@link RejectReason} {@code REASON_} a connect request failing this way is rejected with. */
    public int rejectReason() {
        return rejectReason;
    }
}
