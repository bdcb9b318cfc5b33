package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.ADDRESS;

/**
 * An rdma_cm event channel ({@code struct rdma_event_channel}): the ids created on it report their events here;
 * its fd is pollable. {@link #getEvent()} returns an event that must be acknowledged ({@link CmEvent#ack()}).
 */
public final class CmEventChannel extends NativeObject {
    private final Arena arena = Arena.ofShared();
    private final MemorySegment eventOut = arena.allocate(ADDRESS);
    private final MemorySegment pollfd;
    private final Map<Long, CmId> ids = new ConcurrentHashMap<>();

    private CmEventChannel(MemorySegment channel) {
        super("CmEventChannel", channel.reinterpret(RdmaEventChannel.SIZE));
        pollfd = Libc.pollFd(arena, fd());
    }

    /** {@code rdma_create_event_channel}. */
    public static CmEventChannel create() {
        try {
            MemorySegment channel = LibIbverbs.checkPointer("rdma_create_event_channel",
                    (MemorySegment) LibRdmacm.RDMA_CREATE_EVENT_CHANNEL.invokeExact(Errno.state()));
            return new CmEventChannel(channel);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The pollable fd. */
    public int fd() {
        checkOpen();
        return (int) RdmaEventChannel.FD.get(pointer, 0L);
    }

    /** In non-blocking mode {@link #getEvent()} returns {@code null} instead of waiting. */
    public void setNonBlocking(boolean nonBlocking) {
        Libc.setNonBlocking(fd(), nonBlocking);
    }

    /** Waits up to {@code timeoutMillis} (-1: forever) for an event to be pending; {@code true} if one is. */
    public boolean await(int timeoutMillis) {
        return Libc.awaitReadable(fd(), timeoutMillis);
    }

    /** {@code rdma_create_id} for reliable-connected service ({@code RDMA_PS_TCP}). */
    public CmId createId() {
        checkOpen();
        try (Arena call = Arena.ofConfined()) {
            MemorySegment idOut = call.allocate(ADDRESS);
            LibIbverbs.check("rdma_create_id", (int) LibRdmacm.RDMA_CREATE_ID.invokeExact(Errno.state(), pointer,
                    idOut, MemorySegment.NULL, CmId.RDMA_PS_TCP));
            return new CmId(idOut.get(ADDRESS, 0), this);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code rdma_get_cm_event}: the next event, or {@code null} if none is pending in non-blocking mode. A
     * {@link CmEventType#CONNECT_REQUEST} carries a new {@link CmId} (owned by the caller: accept or reject it,
     * then close it when done).
     */
    public CmEvent getEvent() {
        checkOpen();
        try {
            int rc = (int) LibRdmacm.RDMA_GET_CM_EVENT.invokeExact(Errno.state(), pointer, eventOut);
            if (rc != 0 && Errno.last() == Errno.EAGAIN) {
                return null;
            }
            LibIbverbs.check("rdma_get_cm_event", rc);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        MemorySegment event = eventOut.get(ADDRESS, 0).reinterpret(RdmaCmEvent.SIZE);
        int type = (int) RdmaCmEvent.EVENT.get(event, 0L);
        long idAddress = ((MemorySegment) RdmaCmEvent.ID.get(event, 0L)).address();
        CmId id = ids.get(idAddress);
        if (id == null && type == CmEventType.CONNECT_REQUEST) {
            id = new CmId((MemorySegment) RdmaCmEvent.ID.get(event, 0L), this);
        }
        CmId listenId = ids.get(((MemorySegment) RdmaCmEvent.LISTEN_ID.get(event, 0L)).address());
        if (id == null) {
            ack(event);
            throw new IllegalStateException("rdma_get_cm_event returned " + CmEventType.name(type)
                    + " for an id this channel does not know");
        }
        return new CmEvent(event, type, id, listenId);
    }

    /**
     * The next event if one is pending, else {@code null}, without waiting and, when none is pending, without
     * allocating: looks with {@code poll} first (one syscall, as a failing {@code rdma_get_cm_event} is, but with
     * no errno to capture) and calls {@link #getEvent()} only when the fd is readable (or poll failed: it reports
     * why). For a channel in non-blocking mode, looked at often (the event loop).
     */
    public CmEvent pollEvent() {
        checkOpen();
        if (Libc.pollNow(pollfd) == 0) {
            return null;
        }
        return getEvent();
    }

    static void ack(MemorySegment event) {
        try {
            LibIbverbs.check("rdma_ack_cm_event", (int) LibRdmacm.RDMA_ACK_CM_EVENT.invokeExact(Errno.state(), event));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    void register(CmId id) {
        ids.put(id.address(), id);
    }

    void unregister(CmId id) {
        ids.remove(id.address());
    }

    @Override
    void destroy() {
        try {
            LibRdmacm.RDMA_DESTROY_EVENT_CHANNEL.invokeExact(pointer);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        arena.close();
    }
}
