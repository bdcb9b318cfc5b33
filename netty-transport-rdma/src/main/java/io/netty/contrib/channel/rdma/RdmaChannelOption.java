package io.netty.contrib.channel.rdma;

import io.netty.channel.ChannelOption;

/**
 * Options of {@link RdmaChannel} and {@link RdmaServerChannel} beyond Netty's {@link ChannelOption}s. On a server
 * channel, set them with {@code childOption} for the accepted connections.
 */
public final class RdmaChannelOption<T> extends ChannelOption<T> {
    /**
     * Receive buffers posted for each connection: the number of SENDs (and ring writes) the peer may have in
     * flight before it must wait for credit. Default 64.
     */
    public static final ChannelOption<Integer> RECEIVE_BUFFER_COUNT = valueOf(RdmaChannelOption.class,
            "RECEIVE_BUFFER_COUNT");

    /**
     * Bytes of each posted receive buffer. Writes up to this size (less the 8-byte message header) travel as one
     * SEND; larger ones go by RDMA WRITE WITH IMMEDIATE into the peer's receive ring. Default 8192.
     */
    public static final ChannelOption<Integer> RECEIVE_BUFFER_SIZE = valueOf(RdmaChannelOption.class,
            "RECEIVE_BUFFER_SIZE");

    /**
     * Bytes of each connection's receive ring, the only memory the peer may write remotely (its own memory
     * region and rkey). 0 sends everything by SEND. Default 4 MiB.
     */
    public static final ChannelOption<Integer> RING_SIZE = valueOf(RdmaChannelOption.class, "RING_SIZE");

    /** Work requests the send queue holds: an upper bound of writes in flight. Default 256. */
    public static final ChannelOption<Integer> SEND_QUEUE_DEPTH = valueOf(RdmaChannelOption.class,
            "SEND_QUEUE_DEPTH");

    /** Payloads up to this many bytes are copied into the work request ({@code IBV_SEND_INLINE}). Default 128. */
    public static final ChannelOption<Integer> MAX_INLINE_DATA = valueOf(RdmaChannelOption.class,
            "MAX_INLINE_DATA");

    /** Milliseconds rdma_cm may take to resolve the peer's address and route. Default 2000. */
    public static final ChannelOption<Integer> RESOLVE_TIMEOUT_MILLIS = valueOf(RdmaChannelOption.class,
            "RESOLVE_TIMEOUT_MILLIS");

    @SuppressWarnings({"unused", "deprecation"})
    private RdmaChannelOption() {
        super(null);
    }
}
