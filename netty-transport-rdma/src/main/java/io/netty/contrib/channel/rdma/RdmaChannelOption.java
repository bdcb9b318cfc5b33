package io.netty.contrib.channel.rdma;

import io.netty.channel.ChannelOption;

/**
 * Options of {@link RdmaChannel} and {@link RdmaServerChannel} beyond Netty's {@link ChannelOption}s. On a server
 * channel, set them with {@code childOption} for the accepted connections.
 */
public final class RdmaChannelOption<T> extends ChannelOption<T> {
    /**
     * The most receive credits a connection grants its peer: SENDs (and ring writes) it may have in flight before
     * it must wait. Receive buffers come from the event loop's shared receive queue: a connection starts with
     * {@value RdmaChannelConfig#INITIAL_RECEIVE_CREDITS} credits (or this many if fewer) and its grant doubles,
     * up to this, while its peer keeps using it all. Default 64.
     */
    public static final ChannelOption<Integer> RECEIVE_CREDITS = valueOf(RdmaChannelOption.class,
            "RECEIVE_CREDITS");

    /**
     * Bytes of each receive slot of the shared receive queue. Writes up to this size (less the 8-byte message
     * header) travel as one SEND; larger ones go by RDMA WRITE WITH IMMEDIATE into the peer's receive ring, or as
     * several SENDs while the peer offers no ring. Default 8192.
     */
    public static final ChannelOption<Integer> RECEIVE_SLOT_SIZE = valueOf(RdmaChannelOption.class,
            "RECEIVE_SLOT_SIZE");

    /**
     * Bytes of the receive ring a connection offers its peer while large messages flow: registered when the peer
     * has a write larger than a receive slot waiting, given back after a second without writes. The ring is the
     * only memory the peer may write remotely. 0 never offers one (everything by SEND). Default 1 MiB. The largest
     * ring offered: the rings of one loop's connections together stay within
     * {@link RdmaIoHandlerConfig#ringMemory(long)}, so while others stream a ring may be smaller, or come later.
     */
    public static final ChannelOption<Integer> RING_SIZE = valueOf(RdmaChannelOption.class, "RING_SIZE");

    /**
     * Offer receive rings on a device without type-2 memory windows. There a ring is a memory region whose rkey
     * works on every queue pair of the device's protection domain: a peer that learns or guesses another
     * connection's ring address and rkey can write into it (docs/SECURITY.md). Off by default: without windows,
     * large messages travel as SENDs. With windows (the software device, kernel rxe, most NICs) each ring is
     * writable only on its own connection, whatever this option says.
     */
    public static final ChannelOption<Boolean> ALLOW_PD_WIDE_RKEYS = valueOf(RdmaChannelOption.class,
            "ALLOW_PD_WIDE_RKEYS");

    /**
     * Hand ring writes to the pipeline as buffers over the receive ring itself, without a copy. Only for trusted
     * peers, at two costs: the peer can rewrite bytes the application still holds (the ring is its to write), and
     * held buffers pin the ring (when they pin half of it, a new ring is registered and the old one lives until
     * its last buffer is released). Off by default: every message is copied into a buffer of the channel's
     * {@link ChannelOption#ALLOCATOR} and its space returned at once.
     */
    public static final ChannelOption<Boolean> RECEIVE_ZERO_COPY = valueOf(RdmaChannelOption.class,
            "RECEIVE_ZERO_COPY");

    /**
     * Work requests the send queue holds: an upper bound of writes in flight (which the peer's grant of receive
     * credits bounds too: at most {@link #RECEIVE_CREDITS} of the peer). Default 64.
     */
    public static final ChannelOption<Integer> SEND_QUEUE_DEPTH = valueOf(RdmaChannelOption.class,
            "SEND_QUEUE_DEPTH");

    /**
     * Writes of at most this many bytes are coalesced: the small writes that follow one another in a flush are
     * copied together into one SEND of up to the peer's receive slot ({@link #RECEIVE_SLOT_SIZE} less the message
     * header), as a TCP transport gathers a flush into one {@code writev}. Larger writes go from where they lie, in
     * their order among the small ones. A write alone in its flush is never copied. 0 sends every write as its
     * own message. Default 2048.
     */
    public static final ChannelOption<Integer> WRITE_COALESCE_THRESHOLD = valueOf(RdmaChannelOption.class,
            "WRITE_COALESCE_THRESHOLD");

    /** Payloads up to this many bytes are copied into the work request ({@code IBV_SEND_INLINE}). Default 128. */
    public static final ChannelOption<Integer> MAX_INLINE_DATA = valueOf(RdmaChannelOption.class,
            "MAX_INLINE_DATA");

    /**
     * Milliseconds an accepted connection may take from the accept to ESTABLISHED (the client's last handshake
     * message); one that takes longer is torn down, so half-open handshakes cannot pin a server. Default 10000.
     */
    public static final ChannelOption<Integer> ESTABLISH_TIMEOUT_MILLIS = valueOf(RdmaChannelOption.class,
            "ESTABLISH_TIMEOUT_MILLIS");

    /**
     * On a server channel: connection requests accepted and not yet established (see
     * {@link #ESTABLISH_TIMEOUT_MILLIS}) at most; beyond it requests are rejected ("no resources") until some
     * complete or time out. Default 1024.
     */
    public static final ChannelOption<Integer> MAX_PENDING_HANDSHAKES = valueOf(RdmaChannelOption.class,
            "MAX_PENDING_HANDSHAKES");

    /**
     * On a server channel: connections from one remote IP address at most (pending and established); beyond it
     * its requests are rejected ("no resources"), so one host cannot take every connection. 0, the default, sets
     * no limit (clients behind one NAT or proxy share an address).
     */
    public static final ChannelOption<Integer> MAX_CONNECTIONS_PER_ADDRESS = valueOf(RdmaChannelOption.class,
            "MAX_CONNECTIONS_PER_ADDRESS");

    /** Milliseconds rdma_cm may take to resolve the peer's address and route. Default 2000. */
    public static final ChannelOption<Integer> RESOLVE_TIMEOUT_MILLIS = valueOf(RdmaChannelOption.class,
            "RESOLVE_TIMEOUT_MILLIS");

    /**
     * On a client: connect over TCP instead when RDMA cannot reach the peer — no RDMA on this host (a loop started
     * with {@link RdmaIoHandlerConfig#requireRdma(boolean) requireRdma(false)}), no RDMA route to the address,
     * nothing listening for RDMA there or a reject that is not from this transport's server, or no RDMA connection
     * within {@link #TCP_FALLBACK_TIMEOUT_MILLIS}. The channel stays an {@code RdmaChannel} with the same pipeline;
     * {@link RdmaChannel#isTcp()} and {@link RdmaChannel#fallbackReason()} tell which path it took and why. A
     * reject from an RDMA server of this transport (it is there, and said no) fails the connect as without this
     * option. The reason is logged once per destination and counted ({@link RdmaIoHandlerMetric#tcpFallbacks()});
     * the destination is then reached over TCP without an RDMA attempt for {@link #TCP_FALLBACK_MEMORY_MILLIS}.
     * Needs Netty's epoll channels (netty-transport-native-epoll) on the class path. Off by default: a client that
     * asks for RDMA gets RDMA or an error that names why not, so a mistake in a fabric's set-up does not pass
     * silently as a slower connection.
     */
    public static final ChannelOption<Boolean> TCP_FALLBACK = valueOf(RdmaChannelOption.class, "TCP_FALLBACK");

    /**
     * With {@link #TCP_FALLBACK} on: milliseconds the RDMA attempt may take (resolution, route, handshake) before
     * the channel gives up on it and connects over TCP. {@code CONNECT_TIMEOUT_MILLIS} bounds both attempts
     * together. Default 2000.
     */
    public static final ChannelOption<Integer> TCP_FALLBACK_TIMEOUT_MILLIS = valueOf(RdmaChannelOption.class,
            "TCP_FALLBACK_TIMEOUT_MILLIS");

    /**
     * With {@link #TCP_FALLBACK} on: milliseconds a destination that could not be reached over RDMA is reached over
     * TCP without a new RDMA attempt (the decision is the process's, for that address and port). 0 tries RDMA on
     * every connect. Default 60000.
     */
    public static final ChannelOption<Integer> TCP_FALLBACK_MEMORY_MILLIS = valueOf(RdmaChannelOption.class,
            "TCP_FALLBACK_MEMORY_MILLIS");

    /**
     * On a server channel: also listen for TCP clients on the same address and port number. Each TCP connection is
     * accepted as an {@link RdmaChannel} on its TCP path ({@link RdmaChannel#isTcp()}), through the same child
     * handler and child options (those without a TCP meaning are ignored on it). RDMA ports are a space of their own
     * (InfiniBand, RoCE, kernel rxe and the bundled software device alike), so both listeners hold one number. Needs
     * Netty's epoll channels (netty-transport-native-epoll) on the class path. Off by default.
     */
    public static final ChannelOption<Boolean> TCP_LISTEN = valueOf(RdmaChannelOption.class, "TCP_LISTEN");

    @SuppressWarnings({"unused", "deprecation"})
    private RdmaChannelOption() {
        super(null);
    }
}
