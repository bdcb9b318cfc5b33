package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * An rdma_cm identifier ({@code struct rdma_cm_id}), the RDMA analogue of a socket: bind/listen on the server,
 * resolve address and route then connect on the client; results arrive as {@link CmEvent}s on its channel.
 */
public final class CmId extends NativeObject {
    static final int RDMA_PS_TCP = 0x0106;
    private static final int RDMA_OPTION_ID = 0;
    private static final int RDMA_OPTION_ID_TOS = 0;
    private static final int RDMA_OPTION_ID_REUSEADDR = 1;
    private static final int RDMA_OPTION_ID_ACK_TIMEOUT = 3;
    private static final int RAI_PASSIVE = 1;

    private CmEventChannel channel;
    private VerbsContext verbs;
    private QueuePair qp;
    private volatile Object attachment;

    CmId(MemorySegment id, CmEventChannel channel) {
        super("CmId", id.reinterpret(RdmaCmId.SIZE), channel);
        this.channel = channel;
        channel.register(this);
    }

    /** Whatever the owner of the id wants to find from its events (a channel). */
    public void attach(Object attachment) {
        this.attachment = attachment;
    }

    public Object attachment() {
        return attachment;
    }

    public CmEventChannel channel() {
        return channel;
    }

    /** {@code rdma_bind_addr}; port 0 picks a free port (see {@link #localAddress()}). */
    public void bind(InetSocketAddress address) {
        checkOpen();
        Objects.requireNonNull(address, "address");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sockaddr = Sockaddrs.allocate(arena, address);
            LibIbverbs.check("rdma_bind_addr(" + address + ")",
                    (int) LibRdmacm.RDMA_BIND_ADDR.invokeExact(Errno.state(), pointer, sockaddr));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_listen}. */
    public void listen(int backlog) {
        checkOpen();
        try {
            LibIbverbs.check("rdma_listen", (int) LibRdmacm.RDMA_LISTEN.invokeExact(Errno.state(), pointer, backlog));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_resolve_addr}: completes with {@code ADDR_RESOLVED} or {@code ADDR_ERROR}. */
    public void resolveAddr(InetSocketAddress source, InetSocketAddress destination, int timeoutMillis) {
        checkOpen();
        Objects.requireNonNull(destination, "destination");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = source == null ? MemorySegment.NULL : Sockaddrs.allocate(arena, source);
            MemorySegment dst = Sockaddrs.allocate(arena, destination);
            LibIbverbs.check("rdma_resolve_addr(" + destination + ")", (int) LibRdmacm.RDMA_RESOLVE_ADDR
                    .invokeExact(Errno.state(), pointer, src, dst, timeoutMillis));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code rdma_resolve_route}: completes with {@code ROUTE_RESOLVED} or {@code ROUTE_ERROR}. Only after the
     * address was resolved: rdma-core's librdmacm reads the id's device ({@code cm_id->verbs}) without checking it,
     * so calling it earlier would crash the process.
     */
    public void resolveRoute(int timeoutMillis) {
        checkOpen();
        if (((MemorySegment) RdmaCmId.VERBS.get(pointer, 0L)).address() == 0) {
            throw new IllegalStateException("rdma_resolve_route before the address was resolved: resolve an address"
                    + " first");
        }
        try {
            LibIbverbs.check("rdma_resolve_route",
                    (int) LibRdmacm.RDMA_RESOLVE_ROUTE.invokeExact(Errno.state(), pointer, timeoutMillis));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The address of the device context the id is bound to ({@code verbs}), or 0 before it is bound. */
    public long verbsAddress() {
        checkOpen();
        return ((MemorySegment) RdmaCmId.VERBS.get(pointer, 0L)).address();
    }

    /** The port of its device the id is bound to ({@code port_num}), 0 before it is bound. */
    public int portNum() {
        checkOpen();
        return Byte.toUnsignedInt((byte) RdmaCmId.PORT_NUM.get(pointer, 0L));
    }

    /**
     * The device context the id is bound to (after bind or address resolution), owned by librdmacm. Create the
     * PD and CQs for {@link #createQp} from it.
     */
    public VerbsContext verbs() {
        checkOpen();
        if (verbs == null || !verbs.isOpen()) {
            MemorySegment context = (MemorySegment) RdmaCmId.VERBS.get(pointer, 0L);
            if (context.address() == 0) {
                throw new IllegalStateException("the id is not bound to a device yet: bind it or resolve an"
                        + " address first");
            }
            verbs = VerbsContext.cm(context);
        }
        return verbs;
    }

    /** {@code rdma_create_qp}: an RC QP that rdma_cm moves through INIT/RTR/RTS on connect/accept. */
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attributes) {
        checkOpen();
        Objects.requireNonNull(pd, "pd");
        Objects.requireNonNull(attributes, "attributes");
        pd.checkOpen();
        attributes.check(pd.context);
        if (qp != null && qp.isOpen()) {
            throw new IllegalStateException("the id already has a QP");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = attributes.write(arena);
            LibIbverbs.check("rdma_create_qp",
                    (int) LibRdmacm.RDMA_CREATE_QP.invokeExact(Errno.state(), pointer, pd.pointer, init));
            qp = new QueuePair((MemorySegment) RdmaCmId.QP.get(pointer, 0L), pd, attributes, init, this);
            return qp;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    void destroyQp(QueuePair queuePair) {
        try {
            LibRdmacm.RDMA_DESTROY_QP.invokeExact(pointer);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (qp == queuePair) {
            qp = null;
        }
    }

    /** The QP made by {@link #createQp}, or {@code null}. */
    public QueuePair qp() {
        return qp;
    }

    /** {@code rdma_connect}: completes with {@code ESTABLISHED}, {@code REJECTED} or {@code UNREACHABLE}. */
    public void connect(ConnParam param) {
        checkOpen();
        Objects.requireNonNull(param, "param");
        try (Arena arena = Arena.ofConfined()) {
            LibIbverbs.check("rdma_connect",
                    (int) LibRdmacm.RDMA_CONNECT.invokeExact(Errno.state(), pointer, param.write(arena)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code rdma_init_qp_attr}: the attributes rdma_cm gives a queue pair of this id for the transition to
     * {@code state} (INIT, RTR or RTS; {@code man rdma_init_qp_attr}), written into {@code attr} (an
     * {@code ibv_qp_attr}), the attribute mask returned. For a queue pair the consumer created itself.
     */
    int initQpAttr(int state, MemorySegment attr) {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mask = arena.allocate(JAVA_INT);
            IbvQpAttr.QP_STATE.set(attr, 0L, state);
            LibIbverbs.check("rdma_init_qp_attr(" + IbvQpState.name(state) + ")",
                    (int) LibRdmacm.RDMA_INIT_QP_ATTR.invokeExact(Errno.state(), pointer, attr, mask));
            return mask.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The path MTU ({@code enum ibv_mtu}) rdma_cm gives this id's queue pair at RTR. */
    public int rtrPathMtu() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvQpAttr.LAYOUT);
            initQpAttr(IbvQpState.RTR, attr);
            return (int) IbvQpAttr.PATH_MTU.get(attr, 0L);
        }
    }

    /**
     * {@code rdma_establish}: a client whose queue pair is its own (it got CONNECT_RESPONSE and moved the queue
     * pair to RTS) completes the handshake (the RTU). No ESTABLISHED event follows on this side.
     */
    public void establish() {
        checkOpen();
        try {
            LibIbverbs.check("rdma_establish", (int) LibRdmacm.RDMA_ESTABLISH.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_accept} of the connection request this id came with. */
    public void accept(ConnParam param) {
        checkOpen();
        Objects.requireNonNull(param, "param");
        try (Arena arena = Arena.ofConfined()) {
            LibIbverbs.check("rdma_accept",
                    (int) LibRdmacm.RDMA_ACCEPT.invokeExact(Errno.state(), pointer, param.write(arena)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_reject} with optional private data (up to 255 bytes) for the peer. */
    public void reject(byte[] privateData) {
        checkOpen();
        byte[] data = privateData == null ? new byte[0] : privateData;
        if (data.length > ConnParam.MAX_PRIVATE_DATA) {
            throw new IllegalArgumentException("privateData: " + data.length + " bytes (expected: <= "
                    + ConnParam.MAX_PRIVATE_DATA + ")");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment native_ = MemorySegment.NULL;
            if (data.length > 0) {
                native_ = arena.allocate(data.length);
                MemorySegment.copy(data, 0, native_, JAVA_BYTE, 0, data.length);
            }
            LibIbverbs.check("rdma_reject",
                    (int) LibRdmacm.RDMA_REJECT.invokeExact(Errno.state(), pointer, native_, (byte) data.length));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_disconnect}: both sides get {@code DISCONNECTED}; the QP moves to ERR and flushes. */
    public void disconnect() {
        checkOpen();
        try {
            LibIbverbs.check("rdma_disconnect", (int) LibRdmacm.RDMA_DISCONNECT.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_migrate_id}: from now on this id's events arrive on {@code target}. */
    public void migrate(CmEventChannel target) {
        checkOpen();
        Objects.requireNonNull(target, "target");
        target.checkOpen();
        try {
            LibIbverbs.check("rdma_migrate_id",
                    (int) LibRdmacm.RDMA_MIGRATE_ID.invokeExact(Errno.state(), pointer, target.pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        channel.unregister(this);
        reparent(channel, target);
        channel = target;
        target.register(this);
    }

    /** {@code rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR)}. */
    public void setReuseAddress(boolean reuse) {
        setIntOption("rdma_set_option(REUSEADDR)", RDMA_OPTION_ID_REUSEADDR, reuse ? 1 : 0, JAVA_INT.byteSize());
    }

    /** {@code rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS)}. */
    public void setTos(int tos) {
        setIntOption("rdma_set_option(TOS)", RDMA_OPTION_ID_TOS, tos, 1);
    }

    /**
     * {@code rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT)}: the QP's local ACK timeout code
     * (4.096 us * 2^timeout; 0 = infinite), used when rdma_cm moves the QP to RTS. Set before connect/listen.
     */
    public void setAckTimeout(int timeout) {
        if (timeout < 0 || timeout > 31) {
            throw new IllegalArgumentException("timeout: " + timeout + " (expected: 0-31)");
        }
        setIntOption("rdma_set_option(ACK_TIMEOUT)", RDMA_OPTION_ID_ACK_TIMEOUT, timeout, 1);
    }

    private void setIntOption(String call, int name, int value, long size) {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(JAVA_INT);
            if (size == 1) {
                v.set(JAVA_BYTE, 0, (byte) value);
            } else {
                v.set(JAVA_INT, 0, value);
            }
            LibIbverbs.check(call, (int) LibRdmacm.RDMA_SET_OPTION.invokeExact(Errno.state(), pointer,
                    RDMA_OPTION_ID, name, v, size));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The local address ({@code route.addr.src_addr}), or {@code null} before bind/resolve. */
    public InetSocketAddress localAddress() {
        checkOpen();
        return Sockaddrs.read(pointer.asSlice(RdmaCmId.ROUTE_ADDR_SRC_STORAGE_OFFSET));
    }

    /** The peer's address ({@code route.addr.dst_addr}), or {@code null} if there is none. */
    public InetSocketAddress remoteAddress() {
        checkOpen();
        return Sockaddrs.read(pointer.asSlice(RdmaCmId.ROUTE_ADDR_DST_STORAGE_OFFSET));
    }

    /** {@code rdma_get_src_port}, in host byte order. */
    public int srcPort() {
        checkOpen();
        try {
            return Short.toUnsignedInt(Short.reverseBytes((short) LibRdmacm.RDMA_GET_SRC_PORT.invokeExact(pointer)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code rdma_get_dst_port}, in host byte order. */
    public int dstPort() {
        checkOpen();
        try {
            return Short.toUnsignedInt(Short.reverseBytes((short) LibRdmacm.RDMA_GET_DST_PORT.invokeExact(pointer)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code rdma_getaddrinfo} for an RC connection: the addresses to connect to ({@code passive} false) or to
     * listen on ({@code passive} true).
     */
    public static List<InetSocketAddress> getAddrInfo(String node, String service, boolean passive) {
        if (node == null && service == null) {
            throw new IllegalArgumentException("node and service are both null");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment hints = arena.allocate(RdmaAddrinfo.LAYOUT);
            RdmaAddrinfo.AI_FLAGS.set(hints, 0L, passive ? RAI_PASSIVE : 0);
            RdmaAddrinfo.AI_QP_TYPE.set(hints, 0L, QpInitAttributes.IBV_QPT_RC);
            RdmaAddrinfo.AI_PORT_SPACE.set(hints, 0L, RDMA_PS_TCP);
            MemorySegment resOut = arena.allocate(ADDRESS);
            String call = "rdma_getaddrinfo(" + node + ", " + service + ")";
            MemorySegment nativeNode = node == null ? MemorySegment.NULL : arena.allocateFrom(node);
            MemorySegment nativeService = service == null ? MemorySegment.NULL : arena.allocateFrom(service);
            LibIbverbs.check(call, (int) LibRdmacm.RDMA_GETADDRINFO.invokeExact(Errno.state(), nativeNode,
                    nativeService, hints, resOut));
            MemorySegment head = resOut.get(ADDRESS, 0);
            List<InetSocketAddress> addresses = new ArrayList<>();
            try {
                for (MemorySegment ai = head; ai.address() != 0;
                     ai = (MemorySegment) RdmaAddrinfo.AI_NEXT.get(ai, 0L)) {
                    ai = ai.reinterpret(RdmaAddrinfo.SIZE);
                    MemorySegment sockaddr = (MemorySegment) (passive ? RdmaAddrinfo.AI_SRC_ADDR
                            : RdmaAddrinfo.AI_DST_ADDR).get(ai, 0L);
                    if (sockaddr.address() != 0) {
                        InetSocketAddress address = Sockaddrs.read(sockaddr);
                        if (address != null) {
                            addresses.add(address);
                        }
                    }
                }
            } finally {
                LibRdmacm.RDMA_FREEADDRINFO.invokeExact(head);
            }
            return addresses;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    @Override
    void destroy() {
        try {
            LibIbverbs.check("rdma_destroy_id", (int) LibRdmacm.RDMA_DESTROY_ID.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        channel.unregister(this);
    }
}
