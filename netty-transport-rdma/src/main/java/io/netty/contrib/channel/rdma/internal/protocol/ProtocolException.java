package io.netty.contrib.channel.rdma.internal.protocol;

/** A peer broke the protocol of docs/PROTOCOL.md: the connection cannot go on. */
public final class ProtocolException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }
}
