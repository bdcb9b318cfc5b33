package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * An open device ({@code struct ibv_context}): queries, and the factory of PDs, completion channels and CQs.
 * Either opened here ({@link #open(String)}, closed with {@code ibv_close_device}) or borrowed from an rdma_cm id
 * ({@link CmId#verbs()}, {@link #cmDevices()}: owned by librdmacm for the life of the process, never closed).
 */
public final class VerbsContext extends NativeObject {
    private final boolean owned;
    final ContextOps ops;

    VerbsContext(MemorySegment context, boolean owned, NativeObject parent) {
        super("VerbsContext", context.reinterpret(IbvContext.SIZE), parent);
        this.owned = owned;
        this.ops = new ContextOps(context);
    }

    private static final java.util.concurrent.ConcurrentHashMap<Long, VerbsContext> CM_CONTEXTS =
            new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * The wrapper of a context librdmacm opened (what {@code cm_id->verbs} points at). One per device for the
     * life of the process, so that CQs, PDs and QPs made from different ids of one device match.
     */
    static VerbsContext cm(MemorySegment context) {
        return CM_CONTEXTS.computeIfAbsent(context.address(), a -> new VerbsContext(context, false, null));
    }

    /**
     * The contexts librdmacm uses for its ids ({@code rdma_get_devices}): the device's PD must come from one of
     * these to be usable with QPs made through rdma_cm.
     */
    public static java.util.List<VerbsContext> cmDevices() {
        try (CmDevices pinned = pinCmDevices()) {
            return pinned.contexts();
        }
    }

    /**
     * librdmacm's device list ({@code rdma_get_devices}), held until {@link CmDevices#close() closed}: while it is
     * held, librdmacm does not close a listed device's context even once that device is removed and no rdma_cm id
     * uses it (it closes a removed device's context when its last reference goes), so the PDs, CQs and memory
     * regions made from it can be freed first. Each call also makes librdmacm look again at which devices exist.
     */
    public static CmDevices pinCmDevices() {
        java.util.List<VerbsContext> result = new java.util.ArrayList<>();
        MemorySegment list;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment count = arena.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
            list = LibIbverbs.checkPointer("rdma_get_devices",
                    (MemorySegment) LibRdmacm.RDMA_GET_DEVICES.invokeExact(Errno.state(), count));
            int n = count.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
            MemorySegment array = list.reinterpret((long) n * java.lang.foreign.ValueLayout.ADDRESS.byteSize());
            for (int i = 0; i < n; i++) {
                result.add(cm(array.getAtIndex(java.lang.foreign.ValueLayout.ADDRESS, i)));
            }
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        return new CmDevices(list, java.util.List.copyOf(result));
    }

    /** A device list from {@link #pinCmDevices()}; {@link #close()} gives it back ({@code rdma_free_devices}). */
    public static final class CmDevices implements AutoCloseable {
        private MemorySegment list;
        private final java.util.List<VerbsContext> contexts;

        CmDevices(MemorySegment list, java.util.List<VerbsContext> contexts) {
            this.list = list;
            this.contexts = contexts;
        }

        public java.util.List<VerbsContext> contexts() {
            return contexts;
        }

        /** Idempotent. */
        @Override
        public synchronized void close() {
            if (list == null) {
                return;
            }
            MemorySegment l = list;
            list = null;
            try {
                LibRdmacm.RDMA_FREE_DEVICES.invokeExact(l);
            } catch (Throwable t) {
                throw LibIbverbs.rethrow(t);
            }
        }
    }

    /**
     * The device of {@code context} was removed: its wrapper is forgotten, so that a context librdmacm opens later
     * at the same address gets a new one. Nothing may use {@code context} after.
     */
    public static void forgetCm(VerbsContext context) {
        CM_CONTEXTS.remove(context.address(), context);
        context.retire();
    }

    /** Opens the device called {@code name} ({@code ibv_open_device}). */
    public static VerbsContext open(String name) {
        Objects.requireNonNull(name, "name");
        MemorySegment[] opened = new MemorySegment[1];
        boolean found = VerbsDevice.withDeviceList(device -> {
            if (!VerbsDevice.describe(device).name().equals(name)) {
                return false;
            }
            opened[0] = openDevice(device);
            return true;
        });
        if (!found) {
            throw new IllegalArgumentException("no RDMA device named " + name + "; present: " + VerbsDevice.list());
        }
        return new VerbsContext(opened[0], true, null);
    }

    /** Opens the first device of the list. */
    public static VerbsContext openFirst() {
        MemorySegment[] opened = new MemorySegment[1];
        if (!VerbsDevice.withDeviceList(device -> {
            opened[0] = openDevice(device);
            return true;
        })) {
            throw new VerbsException("ibv_get_device_list", Errno.ENODEV, "no RDMA device present");
        }
        return new VerbsContext(opened[0], true, null);
    }

    private static MemorySegment openDevice(MemorySegment device) {
        try {
            return LibIbverbs.checkPointer("ibv_open_device",
                    (MemorySegment) LibIbverbs.IBV_OPEN_DEVICE.invokeExact(Errno.state(), device));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The device's name. */
    public String deviceName() {
        checkOpen();
        MemorySegment device = ((MemorySegment) IbvContext.DEVICE.get(pointer, 0L)).reinterpret(IbvDevice.SIZE);
        return VerbsDevice.describe(device).name();
    }

    /** The fd that signals asynchronous events ({@code async_fd}). */
    public int asyncFd() {
        checkOpen();
        return (int) IbvContext.ASYNC_FD.get(pointer, 0L);
    }

    public int numCompVectors() {
        checkOpen();
        return (int) IbvContext.NUM_COMP_VECTORS.get(pointer, 0L);
    }

    /** {@code ibv_query_device}. */
    public DeviceAttributes queryDevice() {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(IbvDeviceAttr.LAYOUT);
            LibIbverbs.check("ibv_query_device",
                    (int) LibIbverbs.IBV_QUERY_DEVICE.invokeExact(Errno.state(), pointer, a));
            return new DeviceAttributes(a.getString(IbvDeviceAttr.FW_VER_OFFSET),
                    (long) IbvDeviceAttr.NODE_GUID.get(a, 0L), (int) IbvDeviceAttr.VENDOR_ID.get(a, 0L),
                    (int) IbvDeviceAttr.VENDOR_PART_ID.get(a, 0L), (long) IbvDeviceAttr.MAX_MR_SIZE.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_QP.get(a, 0L), (int) IbvDeviceAttr.MAX_QP_WR.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_SGE.get(a, 0L), (int) IbvDeviceAttr.MAX_CQ.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_CQE.get(a, 0L), (int) IbvDeviceAttr.MAX_MR.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_PD.get(a, 0L), (int) IbvDeviceAttr.MAX_QP_RD_ATOM.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_QP_INIT_RD_ATOM.get(a, 0L), (int) IbvDeviceAttr.MAX_SRQ.get(a, 0L),
                    (int) IbvDeviceAttr.MAX_SRQ_WR.get(a, 0L), (int) IbvDeviceAttr.MAX_SRQ_SGE.get(a, 0L),
                    Byte.toUnsignedInt((byte) IbvDeviceAttr.PHYS_PORT_CNT.get(a, 0L)),
                    (int) IbvDeviceAttr.DEVICE_CAP_FLAGS.get(a, 0L), (int) IbvDeviceAttr.MAX_MW.get(a, 0L));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_query_port} (ports are numbered from 1). */
    public PortAttributes queryPort(int port) {
        checkOpen();
        checkPort(port);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(IbvPortAttr.LAYOUT);
            LibIbverbs.check("ibv_query_port(" + port + ")",
                    (int) LibIbverbs.IBV_QUERY_PORT.invokeExact(Errno.state(), pointer, (byte) port, a));
            return new PortAttributes((int) IbvPortAttr.STATE.get(a, 0L), (int) IbvPortAttr.MAX_MTU.get(a, 0L),
                    (int) IbvPortAttr.ACTIVE_MTU.get(a, 0L), (int) IbvPortAttr.GID_TBL_LEN.get(a, 0L),
                    (int) IbvPortAttr.MAX_MSG_SZ.get(a, 0L),
                    Short.toUnsignedInt((short) IbvPortAttr.PKEY_TBL_LEN.get(a, 0L)),
                    Short.toUnsignedInt((short) IbvPortAttr.LID.get(a, 0L)),
                    Byte.toUnsignedInt((byte) IbvPortAttr.LINK_LAYER.get(a, 0L)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_query_gid}: the 16 raw bytes of GID {@code index} of {@code port}. */
    public byte[] queryGid(int port, int index) {
        checkOpen();
        checkPort(port);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment gid = arena.allocate(IbvGid.LAYOUT);
            LibIbverbs.check("ibv_query_gid(" + port + ", " + index + ")",
                    (int) LibIbverbs.IBV_QUERY_GID.invokeExact(Errno.state(), pointer, (byte) port, index, gid));
            return gid.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_query_pkey}, in host byte order. */
    public int queryPkey(int port, int index) {
        checkOpen();
        checkPort(port);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pkey = arena.allocate(JAVA_SHORT);
            LibIbverbs.check("ibv_query_pkey(" + port + ", " + index + ")",
                    (int) LibIbverbs.IBV_QUERY_PKEY.invokeExact(Errno.state(), pointer, (byte) port, index, pkey));
            return Short.toUnsignedInt(Short.reverseBytes(pkey.get(JAVA_SHORT, 0)));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_alloc_pd}. */
    public ProtectionDomain allocPd() {
        checkOpen();
        try {
            MemorySegment pd = LibIbverbs.checkPointer("ibv_alloc_pd",
                    (MemorySegment) LibIbverbs.IBV_ALLOC_PD.invokeExact(Errno.state(), pointer));
            return new ProtectionDomain(pd, this);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_create_comp_channel}. */
    public CompletionChannel createCompletionChannel() {
        checkOpen();
        try {
            MemorySegment channel = LibIbverbs.checkPointer("ibv_create_comp_channel",
                    (MemorySegment) LibIbverbs.IBV_CREATE_COMP_CHANNEL.invokeExact(Errno.state(), pointer));
            return new CompletionChannel(channel, this);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_create_cq} with at least {@code cqe} entries.
     *
     * @param channel     the completion channel to report to, or {@code null} to poll only
     * @param compVector  the completion vector (0 ... {@link #numCompVectors()} - 1)
     */
    public CompletionQueue createCq(int cqe, CompletionChannel channel, int compVector) {
        checkOpen();
        if (cqe <= 0) {
            throw new IllegalArgumentException("cqe: " + cqe + " (expected: > 0)");
        }
        if (channel != null) {
            channel.checkOpen();
            if (channel.context.address() != address()) {
                throw new IllegalArgumentException("the completion channel belongs to another device context");
            }
        }
        MemorySegment channelPointer = channel == null ? MemorySegment.NULL : channel.pointer;
        try {
            MemorySegment cq = LibIbverbs.checkPointer("ibv_create_cq(" + cqe + ")",
                    (MemorySegment) LibIbverbs.IBV_CREATE_CQ.invokeExact(Errno.state(), pointer, cqe,
                            MemorySegment.NULL, channelPointer, compVector));
            return new CompletionQueue(cq, this, channel);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** Puts the async event fd in non-blocking mode ({@link #getAsyncEvent()} then returns {@code null}). */
    public void setAsyncNonBlocking(boolean nonBlocking) {
        checkOpen();
        Libc.setNonBlocking(asyncFd(), nonBlocking);
    }

    /**
     * {@code ibv_get_async_event} into {@code event} ({@link #allocateAsyncEvent}); {@code false} if none is pending
     * (the fd is non-blocking, {@link #setAsyncNonBlocking}). The event's object cannot be destroyed until the event
     * is acknowledged ({@link #ackAsyncEvent}): look it up first, then acknowledge at once.
     */
    public boolean getAsyncEvent(MemorySegment event) {
        checkOpen();
        try {
            int rc = (int) LibIbverbs.IBV_GET_ASYNC_EVENT.invokeExact(Errno.state(), pointer, event);
            if (rc != 0 && Errno.last() == Errno.EAGAIN) {
                return false;
            }
            LibIbverbs.check("ibv_get_async_event", rc);
            return true;
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** Room for one {@code struct ibv_async_event}. */
    public static MemorySegment allocateAsyncEvent(Arena arena) {
        return arena.allocate(IbvAsyncEvent.LAYOUT);
    }

    /** {@code ibv_ack_async_event}. */
    public static void ackAsyncEvent(MemorySegment event) {
        try {
            LibIbverbs.IBV_ACK_ASYNC_EVENT.invokeExact(event);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The event's {@code event_type} ({@link IbvEventType}). */
    public static int asyncEventType(MemorySegment event) {
        return (int) IbvAsyncEvent.EVENT_TYPE.get(event, 0L);
    }

    /** The address of the event's CQ, QP or SRQ (not for port and device events). */
    public static long asyncEventObject(MemorySegment event) {
        return ((MemorySegment) IbvAsyncEvent.ELEMENT_QP.get(event, 0L)).address();
    }

    /** The port of a port event. */
    public static int asyncEventPort(MemorySegment event) {
        return (int) IbvAsyncEvent.ELEMENT_PORT_NUM.get(event, 0L);
    }

    private static void checkPort(int port) {
        if (port < 1 || port > 255) {
            throw new IllegalArgumentException("port: " + port + " (expected: 1-255)");
        }
    }

    /** Contexts librdmacm opened are never closed by us; {@link #close()} does nothing for them. */
    @Override
    boolean isBorrowed() {
        return !owned;
    }

    @Override
    void destroy() {
        try {
            LibIbverbs.check("ibv_close_device", (int) LibIbverbs.IBV_CLOSE_DEVICE.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
