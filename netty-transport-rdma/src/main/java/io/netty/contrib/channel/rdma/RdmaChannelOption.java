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
     * Bytes of the receive ring a connection offers its peer while large messages flow: carved from the loop's ring
     * memory when the peer has a write larger than a receive slot waiting, given back after a second without
     * writes. The ring is the only memory the peer may write remotely. 0 never offers one (everything by SEND).
     * Default 4 MiB (on one connection between two JVMs, a 1 MiB ring streamed 1.5-2.4 times slower). The largest
     * ring offered: the rings of one loop's connections share {@link RdmaIoHandlerConfig#ringMemory(long)} fairly,
     * so while others stream a ring may be smaller, or come later.
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
     * Hand ring writes (messages larger than a receive slot) to the pipeline as buffers over the receive ring itself,
     * without a copy, and SENDs of at least a quarter of a receive slot as buffers over their slot (lent to the
     * reader until it releases the buffer; a quarter of the loop's shared receive queue at most, then they are
     * copied). On by default, and safe with any peer: a ring slab's memory window is invalidated before any
     * of its bytes is delivered, so the peer cannot change what the application holds, with any rkey it was ever
     * given (docs/SECURITY.md). The buffers are {@link RdmaByteBufAllocator}'s; a reader that holds them keeps their
     * slabs from the writer, and once the held buffers cover half of the ring's slabs, further writes are copied
     * into buffers of the channel's {@link ChannelOption#ALLOCATOR}, so holding never stalls the connection. A
     * channel whose {@link ChannelOption#ALLOCATOR} the application set to an allocator of its own (Vert.x does)
     * gets every message copied into it, as frameworks that release only buffers of their allocator expect. Off:
     * every message is copied (small messages always are). Without type-2 memory windows
     * ({@link #ALLOW_PD_WIDE_RKEYS}) ring writes are always copied.
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
     * With {@code SO_KEEPALIVE} set: milliseconds a connection may be idle (nothing received, no send completed)
     * before it probes its peer with a zero-length RDMA WRITE, which the peer's device acknowledges without its
     * software; a peer gone without a disconnect (a partition, a host that died or hangs) fails the probe by retry
     * exhaustion, and the channel closes with {@code RETRY_EXC_ERR} as its cause within this idle time, the check
     * interval (at most a second) and the retry budget ({@link #ACK_TIMEOUT}, {@link #RETRY_COUNT}). An idle live
     * connection sends one probe per interval. Default 30000.
     */
    public static final ChannelOption<Integer> KEEPALIVE_IDLE_MILLIS = valueOf(RdmaChannelOption.class,
            "KEEPALIVE_IDLE_MILLIS");

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
    // ---------------------------------------------------------------- the fabric: path and transport settings
    // Applied through rdma_cm as rdma-core's tools do (rdma_set_option before the route is resolved or the request
    // accepted, rdma_conn_param on connect/accept); what the device then uses is what
    // RdmaChannel.connectionSettings() reads back with ibv_query_qp. On a server, set them with childOption.

    /**
     * The ACK timeout of the connection's queue pair ({@code RDMA_OPTION_ID_ACK_TIMEOUT}, the QP's
     * {@code timeout}): a request not acknowledged within 4.096 us &times; 2<sup>value</sup> is sent again, up to
     * {@link #RETRY_COUNT} times, after which the QP fails and the channel closes. 0-31 (0: wait forever), or -1,
     * the default, for rdma_cm's own choice (Linux derives it from the path's packet lifetime). Local: each side's
     * value governs its own requests, so a server's childOption applies to what it sends.
     */
    public static final ChannelOption<Integer> ACK_TIMEOUT = valueOf(RdmaChannelOption.class, "ACK_TIMEOUT");

    /**
     * Transport retries after an ACK timeout ({@code rdma_conn_param.retry_count}, the QP's {@code retry_cnt}),
     * 0-7. Default 7. Together with {@link #ACK_TIMEOUT} it bounds how long a dead peer or broken path takes to be
     * noticed: about (value + 1) &times; the timeout. Negotiated: the connect request carries the client's value
     * and rdma_cm gives it to both queue pairs, so a server's childOption has no effect. Kernel rxe (6.1) treats 7
     * as "retry forever", like {@link #RNR_RETRY_COUNT}: there a dead path is noticed only with 6 or less
     * (docs/faults.md).
     */
    public static final ChannelOption<Integer> RETRY_COUNT = valueOf(RdmaChannelOption.class, "RETRY_COUNT");

    /**
     * Retries after a receiver-not-ready NAK ({@code rdma_conn_param.rnr_retry_count}, the QP's
     * {@code rnr_retry}), 0-7, 7 retrying forever. Default 7. The transport's credits keep a peer from sending
     * into an empty receive queue, so an RNR NAK means a peer outside the protocol. Set by the side that sends the
     * NAKs: each side's value travels to its peer (in the connect request or in the accept) and is how many times
     * the peer's queue pair retries, so a client's value applies to the server's sends and a server's childOption
     * to the client's.
     */
    public static final ChannelOption<Integer> RNR_RETRY_COUNT = valueOf(RdmaChannelOption.class,
            "RNR_RETRY_COUNT");

    /**
     * The minimum RNR NAK timer (the QP's {@code min_rnr_timer}): how long this side, as responder, tells a peer
     * that found no receive posted to wait before trying again, as the IBA code 0-31 (1 = 0.01 ms ... 31 =
     * 491.52 ms, 0 = 655.36 ms; {@code man ibv_modify_qp}). -1, the default, keeps rdma_cm's value (Linux: 0).
     * rdma_cm has no option for it and sets the QP to RTR itself, so the transport changes it RTS to RTS (an
     * optional attribute of that transition) as soon as rdma_cm has moved the queue pair there: right after
     * {@code rdma_accept} on a server, at ESTABLISHED on a client. The responder's: each side's value applies to
     * the NAKs it sends.
     */
    public static final ChannelOption<Integer> MIN_RNR_TIMER = valueOf(RdmaChannelOption.class, "MIN_RNR_TIMER");

    /**
     * The service level of the connection's queue pair (the address vector's {@code ah_attr.sl}), 0-15: on
     * InfiniBand it selects the virtual lane through the switches' SL-to-VL tables (the QoS class); on RoCE the
     * driver maps it to the frame's 802.1p priority on a VLAN netdev (hardware takes the low three bits) where
     * rdma_cm would derive it from the traffic class. -1, the default, keeps rdma_cm's (the path record's on
     * InfiniBand, the priority of {@link io.netty.channel.ChannelOption#IP_TOS} on RoCE). rdma_cm has no option for
     * it, so a connection with this (or {@link #PATH_MTU}) set has its queue pair moved to RTR by the transport
     * ({@code rdma_init_qp_attr}, then {@code ibv_modify_qp} with the SL replaced, as rping's {@code -q} mode does).
     * Local: each side's value is the SL of what it sends, so a server sets it with childOption for its side.
     * Kernel rxe keeps no SL (its {@code ibv_query_qp} reports 0); RoCE v2 packets carry none of their own.
     */
    public static final ChannelOption<Integer> SERVICE_LEVEL = valueOf(RdmaChannelOption.class, "SERVICE_LEVEL");

    /**
     * A cap on the connection's path MTU (the queue pair's {@code path_mtu}), in bytes: 256, 512, 1024, 2048 or
     * 4096; 0, the default, runs at the path's MTU (rdma_cm's: on RoCE the smaller of the netdev's and the port's
     * active MTU). The largest payload of one packet: messages are split into packets of this size, so a smaller
     * MTU costs headers and per-packet work, and is what a path whose hops carry less needs. A cap above the path's
     * MTU changes nothing. Both queue pairs of a connection must use one MTU (IBA C9-92: the responder refuses a
     * first or middle packet of another size), so it is negotiated: the connect parameters carry the client's cap,
     * the server's queue pair takes the smaller of both caps and the path's, and the client's takes the server's.
     * Setting it has the transport move the queue pair to RTR itself (see {@link #SERVICE_LEVEL}); a server's
     * childOption cap refuses clients whose queue pair rdma_cm drives at a larger MTU (they do not set this option
     * or {@link #SERVICE_LEVEL}), naming the remedy.
     */
    public static final ChannelOption<Integer> PATH_MTU = valueOf(RdmaChannelOption.class, "PATH_MTU");

    /**
     * The RDMA device a client's connection must use, by its verbs name ({@code rxe0}, {@code mlx5_0}); empty,
     * the default, takes the device rdma_cm picks by route (the one holding the source address). rdma_cm alone
     * chooses by address, so this pins by checking: a connection whose route resolves to another device fails at
     * once with both names and the remedy (bind the channel to an address of the wanted device). A server uses
     * the device of the address it is bound to.
     */
    public static final ChannelOption<String> DEVICE = valueOf(RdmaChannelOption.class, "DEVICE");

    /**
     * The GID type a client's connection must use: {@code "IB"}, {@code "RoCE v1"} or {@code "RoCE v2"}; empty,
     * the default, takes the one rdma_cm picks (on RoCE the port's {@code default_roce_mode}, normally v2; an
     * IPv4 address gives the IPv4-mapped GID, an IPv6 address the IPv6 one). rdma_cm offers no per-connection
     * choice, so this pins by checking: a connection whose queue pair got a source GID of another type fails
     * before it becomes active, naming the type found and the remedy
     * ({@code /sys/kernel/config/rdma_cm/<device>/ports/<port>/default_roce_mode}).
     */
    public static final ChannelOption<String> GID_TYPE = valueOf(RdmaChannelOption.class, "GID_TYPE");

    @SuppressWarnings({"unused", "deprecation"})
    private RdmaChannelOption() {
        super(null);
    }
}
